"""End to end with real processes and the real model: `ingestd run`, `resync`, `search`.

The daemon is the installed console script; the CLI talks to it through its control
socket. Everything is polled with deadlines. The final store is opened directly with
qdrant-client and compared with a from-scratch ingest of the final tree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    assert_matches_oracle,
    copy_tree,
    fake_vectors,
    ingestd_cmd,
    run_cli,
    start_ingestd_run,
    wait_fifo_reader,
    wait_for,
)

pytestmark = pytest.mark.slow

FILES = (
    "docs/collector/quick-start.md",
    "docs/concepts/glossary.md",
    "docs/languages/python/exporters.md",
)


def _search(state: Path, query: str, k: int = 3) -> list[dict[str, Any]]:
    proc = run_cli("search", "--state-dir", str(state), "--json", "-k", str(k), query, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _status(state: Path) -> dict[str, Any]:
    proc = run_cli("status", "--state-dir", str(state), "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _paths(hits: list[dict[str, Any]]) -> list[str]:
    return [h["path"] for h in hits]


def test_resync_verify_search_cli(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "docs", FILES)
    state = tmp_path / "state"
    first = run_cli("resync", "--state-dir", str(state), str(root), timeout=300)
    assert first.returncode == 0, first.stderr
    assert "3 indexed" in first.stdout
    noop = run_cli("resync", "--state-dir", str(state), str(root), "--json", timeout=60)
    assert noop.returncode == 0
    assert json.loads(noop.stdout)["sources"][0]["indexed"] == 0
    verify = run_cli("verify", "--state-dir", str(state), str(root), timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    hits = _search(state, "how do I export traces to the console in python")
    assert hits and {"path", "score", "text", "start_line", "heading_path"} <= set(hits[0])
    assert hits[0]["path"] == "docs/languages/python/exporters.md"
    # a second writer gets a one-line error while the first holds the state dir
    from ingestd.daemon.wire.statelock import StateLock

    lock = StateLock(state)
    lock.acquire("test")
    try:
        busy = run_cli("resync", "--state-dir", str(state), str(root), timeout=60)
    finally:
        lock.release()
    assert busy.returncode == 1
    assert "in use by another ingestd process" in busy.stderr
    assert len(busy.stderr.strip().splitlines()) == 1


def test_run_follows_edits_and_stops_cleanly(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "docs", FILES)
    state = tmp_path / "state"
    log = (tmp_path / "daemon.log").open("w")
    env = {**os.environ, "INGESTD_STATE_DIR": ""}
    proc = subprocess.Popen(
        [*ingestd_cmd(), "run", "--state-dir", str(state), str(root)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        wait_for(
            lambda: (
                (tmp_path / "state" / "control-socket").exists()
                and (_status(state).get("daemon") or {}).get("phase") == "watching"
            ),
            240,
            "the first reconcile",
        )
        st = _status(state)
        (src,) = st["sources"]
        assert src["documents"] == 3 and src["chunks"] > 10
        embedded0 = st["embedded_since_start"]

        # add
        new = root / "docs/zebra.md"
        new.write_text("# Zebra crossings\n\nA zebra crossing is a striped pedestrian crossing.\n")
        wait_for(
            lambda: "docs/zebra.md" in _paths(_search(state, "striped pedestrian crossing")),
            15,
            "the added file in search",
        )
        # edit
        new.write_text("# Zebra crossings\n\nPelican crossings have traffic lights instead.\n")
        wait_for(
            lambda: any("Pelican" in h["text"] for h in _search(state, "pelican crossing")),
            15,
            "the edit in search",
        )
        embedded1 = _status(state)["embedded_since_start"]
        # rename: re-keyed, never embedded again
        os.rename(root / "docs/concepts/glossary.md", root / "docs/glossary.md")
        wait_for(
            lambda: "docs/glossary.md" in _paths(_search(state, "glossary of terms", 5)),
            15,
            "the renamed file in search",
        )
        assert _status(state)["embedded_since_start"] == embedded1
        # delete
        new.unlink()
        wait_for(
            lambda: "docs/zebra.md" not in _paths(_search(state, "pelican crossing", 10)),
            15,
            "the deleted file to leave search",
        )
        assert embedded1 > embedded0

        verify = run_cli("verify", "--state-dir", str(state), "--json", timeout=120)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert json.loads(verify.stdout)["clean"] is True

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    logtext = (tmp_path / "daemon.log").read_text()
    assert "Traceback" not in logtext, logtext
    assert "Loading weights" not in logtext  # no third-party progress bars in logs
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_run_preloads_the_model_reports_a_missing_root_and_stops_fast_when_idle(
    tmp_path: Path,
) -> None:
    """Nothing to embed, yet the model is loaded once the daemon is ready; a source
    whose root is missing at start makes the daemon unhealthy (never "everything
    deleted"); SIGTERM of the idle daemon ends it within 2 s, "stopped" logged last."""
    import time

    root = tmp_path / "docs"
    root.mkdir()
    missing = tmp_path / "unmounted"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        json.dumps(
            {
                "sources": [
                    {"name": "docs", "root": str(root)},
                    {"name": "gone", "root": str(missing)},
                ]
            }
        )
    )
    state = tmp_path / "state"
    log = tmp_path / "daemon.log"
    proc = start_ingestd_run(cfg, state, log)
    try:

        def daemon_status() -> Any:
            p = run_cli("status", "--json", "--state-dir", str(state), timeout=60)
            d = json.loads(p.stdout or "{}").get("daemon") if p.stdout else None
            return (p.returncode, d) if d else None

        code, d = wait_for(daemon_status, 120, "the daemon's status", interval=0.5)
        assert code == 1 and d["healthy"] is False
        assert d["missing_roots"] == [str(missing)]
        wait_for(lambda: daemon_status()[1]["model_loaded"], 240, "the model to preload", 1.0)
        assert "ERROR" in log.read_text() and str(missing) in log.read_text()
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        took = time.monotonic() - t0
        assert took < 2.0, f"an idle daemon took {took:.2f} s to stop"
        lines = log.read_text().strip().splitlines()
        assert lines[-1].endswith("ingestd stopped"), lines[-3:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_stops_run_cleanly_with_exit_0_and_a_one_shot_command_with_130(
    tmp_path: Path,
) -> None:
    """The exit codes the reference gives: Ctrl-C (SIGINT) is a requested stop for
    ``ingestd run``, as SIGTERM is (exit 0, nothing printed about an interruption); a
    one-shot command interrupted by Ctrl-C prints "Interrupted (^C)" and exits 130."""
    root = copy_tree(tmp_path / "docs", FILES[:1])
    state = tmp_path / "state"
    log = tmp_path / "daemon.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*ingestd_cmd(), "run", "--state-dir", str(state), str(root)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:

        def watching() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            p = run_cli("status", "--json", "--state-dir", str(state), timeout=60)
            d = json.loads(p.stdout or "{}").get("daemon") if p.stdout.strip() else None
            return bool(d) and d.get("phase") == "watching"

        wait_for(watching, 600, "the daemon to watch", interval=0.5)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        text = log.read_text()
        assert "Interrupted" not in text and "Traceback" not in text
        assert text.strip().splitlines()[-1].endswith("ingestd stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # a one-shot command: `ingestd chunk` of a FIFO whose writer never writes (it waits
    # in slices of 0.2 s, so a SIGINT landing just before a wait is not lost)
    fifo = root / "never.md"
    os.mkfifo(fifo)
    chunk = subprocess.Popen(
        [*ingestd_cmd(), "chunk", "--state-dir", str(state), str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a terminal starts it: a parallel test worker ignores SIGINT, a child inherits
        # that, and Python installs its Ctrl-C handler only where SIGINT is not ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    writer = -1
    try:
        writer = wait_fifo_reader(fifo, chunk, "ingestd chunk to open the file", chunk.communicate)
        chunk.send_signal(signal.SIGINT)
        _out, err = chunk.communicate(timeout=120)
        assert chunk.returncode == 130, err
        assert "Interrupted (^C)" in err and "Traceback" not in err
    finally:
        if writer >= 0:
            os.close(writer)
        if chunk.poll() is None:
            chunk.kill()
            chunk.wait()
