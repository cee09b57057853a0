"""Readers never write and never keep the daemon from starting: real processes.

Before, ``ingestd status`` with no daemon took the state dir's one lock and opened the
Qdrant Edge store to count it (loading, flushing and closing its shard), so a status
poll wrote to the store, and ``ingestd run`` started meanwhile exited at once ("in use
by another ingestd process"): once in about 40 starts, and a health check was enough
to make a systemd start fail. Now ``status`` reads files under a shared lock, and
``run`` waits for readers.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import REPO, ingested_tree, run_cli, wait_for

pytestmark = pytest.mark.slow

BOTH = pytest.mark.parametrize("qdrant_engine", ["edge", "local"], indirect=True)


def _snapshot(state: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry of ``state``: modification time, and a file's content."""
    out: dict[str, tuple[int, bytes | None]] = {".": (state.stat().st_mtime_ns, None)}
    for p in sorted(state.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(state))] = (st.st_mtime_ns, p.read_bytes() if p.is_file() else None)
    return out


@BOTH
def test_status_and_reads_without_a_daemon_leave_every_file_of_the_state_dir_unchanged(
    tmp_path: Path, qdrant_engine: str
) -> None:
    root, state = ingested_tree(tmp_path)
    before = _snapshot(state)
    for args in (["status"], ["status", "--json"], ["sources"]):
        proc = run_cli(*args, "--state-dir", str(state))
        assert proc.returncode == 0, proc.stderr
        assert "note:" not in proc.stdout, proc.stdout  # counted from the clean-close record
    st = json.loads(run_cli("status", "--state-dir", str(state), "--json", check=True).stdout)
    assert st["sources"][0]["chunks"] == 100 and st["daemon"] is None
    assert _snapshot(state) == before
    if qdrant_engine == "local":  # local mode loads a store without writing it
        sd = ("--state-dir", str(state))
        proc = run_cli("search", *sd, "--mode", "sparse", "--json", "collector")
        assert proc.returncode == 0, proc.stderr
        hit = json.loads(proc.stdout)[0]  # the hits, as a JSON list
        proc = run_cli("read", *sd, hit["id"], "--json")  # a hit widened to its section
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["path"] == hit["path"]
        assert _snapshot(state) == before


def _fakecli(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.faults.fakecli", *args],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


class Poller:
    """``ingestd status --json`` in a process of its own every 0.2 s, as a health check."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.polls = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll)

    def _poll(self) -> None:
        while not self._stop.is_set():
            proc = run_cli("status", "--state-dir", str(self.state), "--json", timeout=120)
            self.polls += 1
            if proc.returncode:
                self.errors.append(proc.stderr + proc.stdout[-1500:])
            self._stop.wait(0.2)  # the poller's interval

    def __enter__(self) -> Poller:
        self._thread.start()
        wait_for(lambda: self.polls >= 2 or self.errors, 120, "the poller to run")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(180)


def _start_and_stop(root: Path, state: Path, log: Path, poller: Poller) -> None:
    """``ingestd run`` until ready and polled once, then SIGTERM: it must exit 0."""
    daemon = _fakecli(["run", "--state-dir", str(state), str(root)], log)
    polled = poller.polls
    try:
        wait_for(
            lambda: "ready:" in log.read_text() or daemon.poll() is not None,
            180,
            "the daemon to be ready",
        )
        assert daemon.poll() is None, log.read_text()[-3000:]
        wait_for(lambda: poller.polls > polled, 120, "a poll while it runs")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert "in use by another ingestd process" not in log.read_text()


def test_ingestd_run_starts_every_time_while_status_is_polled(tmp_path: Path) -> None:
    """10 of 10 starts succeed while another process polls ``status --json`` every 0.2 s."""
    root, state = ingested_tree(tmp_path)
    started = []
    with Poller(state) as poller:
        for i in range(10):
            _start_and_stop(root, state, tmp_path / f"run-{i}.log", poller)
            assert not poller.errors, poller.errors  # a poll never failed, even mid-stop
            started.append(i)
    assert started == list(range(10)) and poller.polls >= 10


def test_run_waits_for_a_reader_and_says_so(tmp_path: Path) -> None:
    """A reader that holds the state dir (a long search) delays the start; it does not fail it."""
    from ingestd.daemon.wire.statelock import StateLock

    root, state = ingested_tree(tmp_path)
    lock = StateLock(state)  # a writer made the lock files (the in-process ingest takes none)
    lock.acquire("ingestd resync")
    lock.release()
    code = (
        "import sys; from ingestd.daemon.wire.statelock import ReadLock; "
        f"lock = ReadLock({str(state)!r}, store=True); lock.acquire(); print('in', flush=True); "
        "sys.stdin.readline()"
    )
    reader = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    log = tmp_path / "run.log"
    daemon = None
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "in"
        daemon = _fakecli(["run", "--state-dir", str(state), str(root)], log)
        wait_for(lambda: "waiting up to" in log.read_text(), 120, "the daemon to wait")
        assert f"1 reader (pid {reader.pid}: python)" in log.read_text()
        assert daemon.poll() is None and "ready:" not in log.read_text()
        reader.communicate("\n", timeout=30)
        wait_for(lambda: "ready:" in log.read_text(), 120, "the daemon to start")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=120) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.wait()


def test_searches_without_a_daemon_while_one_starts_are_answered(tmp_path: Path) -> None:
    """Readers and a starting daemon: every search answers, from here or from the daemon."""
    root, state = ingested_tree(tmp_path)
    log = tmp_path / "run.log"
    daemon = _fakecli(["run", "--state-dir", str(state), str(root)], log)
    try:
        for _ in range(3):  # before, during and after the daemon's start
            proc = run_cli("search", "--state-dir", str(state), "--mode", "sparse", "collector")
            assert proc.returncode == 0 and "collector" in proc.stdout.lower(), proc.stderr
        wait_for(lambda: "ready:" in log.read_text(), 120, "the daemon to start")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert "in use by another ingestd process" not in log.read_text()
