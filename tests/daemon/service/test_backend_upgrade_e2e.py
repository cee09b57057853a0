"""An upgrade end to end: a store made with the graph torch exported, served by the built graph.

The real model and a real daemon. The store is made by ``ingestd resync`` as ingestd
made it before its graph builder: the default backend running the graph
``torch.onnx.export`` made (the recipe ``TORCH_EXPORT``, patched in for that process).
``ingestd run`` of this version then starts with the same configuration and the same
model cache: it builds its own graph (a file of another name) and serves the store.
Throughout, searches answer; the start-up reconcile embeds nothing (the embedding
cache gains no row: the model's fingerprint did not change); an edit is embedded by the
built graph; ``verify`` is clean after.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.config.models import default_backend
from ingestd.store.embedding.embedder import BUNDLED_MODEL, model_info
from ingestd.store.embedding.graphs.onnx_export import cached_export
from ingestd.store.embedding.graphs.recipes import RECIPES, TORCH_EXPORT
from tests.daemon.harness import FAST_WATCH
from tests.helpers import copy_tree, run_cli, start_ingestd_run, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.engine("edge"), pytest.mark.timeout(2400)]


def _cached_texts(state: Path) -> int:
    db = sqlite3.connect(state / "embeddings.db")
    try:
        (n,) = db.execute("SELECT COUNT(*) FROM vectors").fetchone()
    finally:
        db.close()
    return int(n)


def _search(state: Path, config: Path, query: str) -> list[dict[str, Any]]:
    out = run_cli(
        "search", "--config", str(config), "--state-dir", str(state), "--json", "-k", "3",
        query, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    hits: list[dict[str, Any]] = json.loads(out.stdout)
    return hits


def _phase(state: Path, config: Path) -> str:
    out = run_cli("status", "--json", "--config", str(config), "--state-dir", str(state))
    daemon = json.loads(out.stdout or "{}").get("daemon") or {}
    return str(daemon.get("phase", ""))


#: ``ingestd`` as it was before the graph builder: every ONNX backend's graph exported
#: through torch (the recipes' dict is shared by every module that reads it).
BEFORE_THE_BUILDER = (
    "import sys\n"
    "from ingestd.store.embedding.graphs.recipes import RECIPES, TORCH_EXPORT\n"
    "RECIPES['onnx'] = RECIPES['openvino'] = TORCH_EXPORT\n"
    "from ingestd.daemon.cli import main\n"
    "sys.exit(main())\n"
)


def test_a_store_made_by_the_export_through_torch_is_served_by_the_built_graph_embedding_nothing(
    tmp_path: Path,
) -> None:
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    models = tmp_path / "models"
    cfg = tmp_path / "config.yaml"  # the defaults: no backend named
    cfg.write_text(
        json.dumps(
            {
                "sources": [{"name": "docs", "root": str(root)}],
                "embedding": {"cache_dir": str(models)},
                "watch": FAST_WATCH,
            }
        )
    )
    args = ["resync", "--config", str(cfg), "--state-dir", str(state)]
    made = subprocess.run(
        [sys.executable, "-c", BEFORE_THE_BUILDER, *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert made.returncode == 0, made.stderr
    info = model_info(BUNDLED_MODEL, default_backend())
    assert info.backend in ("openvino", "onnx") and info.recipe == RECIPES[info.backend]
    before_the_builder = cached_export(info, models, TORCH_EXPORT)
    assert before_the_builder is not None and cached_export(info, models) is None
    assert before_the_builder.name == "all-MiniLM-L6-v2-fp32-0d68fa3d6997fcd6.onnx"
    before = _cached_texts(state)
    assert before > 0

    log = tmp_path / "ingestd.log"
    proc = start_ingestd_run(cfg, state, log)
    try:

        def answering() -> bool:
            live = run_cli("status", "--live", "--config", str(cfg), "--state-dir", str(state))
            return live.returncode == 0

        wait_for(answering, 300, "the daemon to answer", interval=0.5)
        hits = _search(state, cfg, "How does the collector receive telemetry?")
        assert hits, "a search answered nothing"
        wait_for(lambda: cached_export(info, models), 600, "the built graph", interval=0.5)
        wait_for(lambda: _phase(state, cfg) == "watching", 300, "the start-up reconcile")
        assert _cached_texts(state) == before, "the start-up reconcile embedded text again"

        page = root / "docs/concepts/glossary.md"
        page.write_text(
            page.read_text() + "\n\nA pangolin curls into an armoured ball when threatened.\n"
        )

        def edit_found() -> bool:
            hits = _search(state, cfg, "pangolin armoured ball")
            return any("pangolin" in h["text"] for h in hits)

        wait_for(edit_found, 300, "the edit to be searchable", interval=0.5)
        assert 0 < _cached_texts(state) - before <= 3  # the edited text only
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    text = log.read_text()
    assert "making the ONNX graph" in text and "through torch" not in text
    assert "Traceback" not in text, text[-3000:]
    checked = run_cli("verify", "--config", str(cfg), "--state-dir", str(state), timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr
