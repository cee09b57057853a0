"""A file the Edge engine maps whole, cut short, is found from its size before it is read.

Before: a running daemon whose payload page was cut under it died by SIGBUS at its
next read of the page, with no log line; ``status`` exited 0 on a cut payload page
(search, verify and run reported it). Now the size of every file the engine maps whole
(Gridstore pages, dense vector chunks) is checked against its storage's
``config.json``: by ``status``, before a shard is loaded, and by the daemon before each
job, which stops with the one line naming ``ingestd resync --rebuild``. A cut landing
in the middle of a job leaves faulthandler's ``Fatal Python error: Bus error`` in the
log.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import (
    REPO,
    assert_matches_oracle,
    edge_shard,
    fake_vectors,
    ingested_tree,
    run_cli,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.engine("edge")]


def _cut(state: Path, pattern: str) -> Path:
    """Cut the biggest file of the shard matching ``pattern`` to 4 KiB; returns it."""
    file = max(edge_shard(state).glob(pattern), key=lambda p: p.stat().st_blocks)
    with file.open("r+b") as f:
        f.truncate(4096)
    return file


@pytest.mark.parametrize(
    "pattern", ["segments/*/payload_storage/page_*.dat", "segments/*/vector_storage/*/chunk_*.mmap"]
)
def test_status_exits_1_with_one_line_on_a_cut_mapped_file(tmp_path: Path, pattern: str) -> None:
    root, state = ingested_tree(tmp_path)
    cut = _cut(state, pattern)
    status = run_cli("status", "--state-dir", str(state))
    assert status.returncode == 1, status.stdout + status.stderr
    lines = status.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in status.stderr, status.stderr
    assert cut.name in lines[0] and "4,096 bytes where the engine maps" in lines[0]
    assert "ingestd resync --rebuild" in lines[0]
    rebuild = subprocess.run(
        [sys.executable, "-m", "tests.faults.fakecli", "resync", "--rebuild"]
        + ["--state-dir", str(state), str(root)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert rebuild.returncode == 0, rebuild.stderr[-3000:]
    assert run_cli("status", "--state-dir", str(state)).returncode == 0
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def _daemon(root: Path, state: Path, log: Path) -> subprocess.Popen[bytes]:
    """``ingestd run`` (with fake vectors) on ``root``, its output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.faults.fakecli", "run"]
            + ["--state-dir", str(state), str(root)],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def test_a_payload_page_cut_under_a_running_daemon_stops_it_with_its_line(
    tmp_path: Path,
) -> None:
    root, state = ingested_tree(tmp_path)
    log = tmp_path / "run.log"
    run = _daemon(root, state, log)
    try:
        wait_for(lambda: "in sync" in log.read_text(errors="replace"), 120, "the start-up scan")
        _cut(state, "segments/*/payload_storage/page_*.dat")
        page = root / "docs/concepts/glossary.md"
        page.write_text(page.read_text() + "\n\nAn edit made after the page was cut.\n")
        run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    said = log.read_text(errors="replace")
    assert run.returncode == 1, (
        f"exit {run.returncode} (SIGBUS is {-signal.SIGBUS}):\n{said[-3000:]}"
    )
    assert "4,096 bytes where the engine maps" in said and "ingestd resync --rebuild" in said
    assert "Traceback" not in said and "Bus error" not in said, said[-3000:]


def test_a_fatal_signal_in_the_daemon_leaves_a_line(tmp_path: Path) -> None:
    """The floor for a cut landing mid-job: faulthandler says the signal and the stacks."""
    root, state = ingested_tree(tmp_path)
    log = tmp_path / "run.log"
    run = _daemon(root, state, log)
    try:
        wait_for(lambda: "in sync" in log.read_text(errors="replace"), 120, "the start-up scan")
        run.send_signal(signal.SIGBUS)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    said = log.read_text(errors="replace")
    assert run.returncode == -signal.SIGBUS
    assert "Fatal Python error: Bus error" in said, said[-3000:]
