"""``embedding.keep_alive_s`` end to end: an idle daemon lets the model go, a search loads it.

The real model and a real ``ingestd run``: once the model has been unused for
``keep_alive_s``, status says it is not loaded and the daemon's resident memory drops
by the weights; the next search answers (loading it again) and the model is loaded
after it.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.daemon.harness import FAST_WATCH
from tests.helpers import copy_tree, run_cli, start_ingestd_run, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.engine("edge"), pytest.mark.timeout(1200)]

KEEP_ALIVE_S = 8.0


def _rss_mb(pid: int) -> float:
    m = re.search(r"^VmRSS:\s*(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    assert m is not None
    return int(m.group(1)) / 1024


def _daemon(state: Path, config: Path) -> dict[str, Any]:
    out = run_cli("status", "--json", "--config", str(config), "--state-dir", str(state))
    return dict(json.loads(out.stdout or "{}").get("daemon") or {})


def _search(state: Path, config: Path, query: str) -> list[dict[str, Any]]:
    out = run_cli(
        "search", "--config", str(config), "--state-dir", str(state), "--json", "-k", "3",
        "--mode", "dense", query, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    hits: list[dict[str, Any]] = json.loads(out.stdout)
    return hits


def test_an_idle_daemon_lets_the_model_go_and_a_search_loads_it_again(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        json.dumps(
            {
                "sources": [{"name": "docs", "root": str(root)}],
                "embedding": {"keep_alive_s": KEEP_ALIVE_S},
                "watch": FAST_WATCH,
            }
        )
    )
    log = tmp_path / "ingestd.log"
    proc = start_ingestd_run(cfg, state, log)
    try:
        wait_for(lambda: _daemon(state, cfg).get("phase") == "watching", 600, "the first reconcile")
        assert _search(state, cfg, "How does the collector receive telemetry?")
        loaded = _rss_mb(proc.pid)  # within keep_alive_s of the search's model call
        wait_for(
            lambda: _daemon(state, cfg).get("model_loaded") is False,
            KEEP_ALIVE_S + 120,
            "the model to be unloaded",
            interval=0.5,
        )
        idle = _rss_mb(proc.pid)
        # the weights alone are ~90 MB (float32 all-MiniLM-L6-v2)
        assert loaded - idle >= 50, (loaded, idle)
        # a new query (a query's vector is cached): the model loads again
        hits = _search(state, cfg, "What is a span in a trace?")
        assert hits and all(h["text"] for h in hits)
        assert _daemon(state, cfg).get("model_loaded") is True
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    text = log.read_text()
    assert "embedding model unloaded after" in text
    assert "Traceback" not in text, text[-3000:]
