"""A store made with torch, served by ``ingestd run`` under the new default, end to end.

The real model and a real daemon: the store is made by ``ingestd resync`` with
``embedding.backend: torch``; ``ingestd run`` then starts with the default configuration
(``openvino`` where the CPU has bfloat16, else ``onnx``) and an empty model cache, so
the ONNX export runs in the background at first start. Throughout, searches answer; the
start-up reconcile embeds nothing (the embedding cache gains no row); an edit made once
the graph is exported is embedded by it; ``verify`` is clean after.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.config.models import default_backend
from ingestd.store.embedding.embedder import BUNDLED_MODEL, model_info
from ingestd.store.embedding.onnx_export import cached_export
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


def test_a_torch_store_is_served_by_the_default_backend_with_nothing_embedded_again(
    tmp_path: Path,
) -> None:
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    models = tmp_path / "models"
    torch_cfg = tmp_path / "torch.yaml"
    torch_cfg.write_text(
        json.dumps(
            {
                "sources": [{"name": "docs", "root": str(root)}],
                "embedding": {"backend": "torch", "cache_dir": str(models)},
            }
        )
    )
    made = run_cli("resync", "--config", str(torch_cfg), "--state-dir", str(state), timeout=600)
    assert made.returncode == 0, made.stderr
    before = _cached_texts(state)
    assert before > 0

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
    info = model_info(BUNDLED_MODEL, default_backend())
    assert info.backend in ("openvino", "onnx") and cached_export(info, models) is None
    log = tmp_path / "ingestd.log"
    proc = start_ingestd_run(cfg, state, log)
    try:

        def answering() -> bool:
            live = run_cli("status", "--live", "--config", str(cfg), "--state-dir", str(state))
            return live.returncode == 0

        wait_for(answering, 300, "the daemon to answer", interval=0.5)
        answered = 0

        def exported() -> bool:
            nonlocal answered
            hits = _search(state, cfg, "How does the collector receive telemetry?")
            assert hits, "a search answered nothing while the graph was exported"
            answered += 1
            return cached_export(info, models) is not None

        wait_for(exported, 1200, "the background ONNX export", interval=0.5)
        assert answered >= 1
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
    assert "exporting" in text and "in the background" in text
    assert "Traceback" not in text, text[-3000:]
    checked = run_cli("verify", "--config", str(cfg), "--state-dir", str(state), timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr
