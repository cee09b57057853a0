"""``ingestd run`` stopped by SIGINT or SIGTERM while it starts: exit 0, nothing printed.

The service installs its own handlers (finish the write in flight, exit 0) once its
imports and the config are done, about half a second in; before this fix a Ctrl-C in
that time exited 130 with "Interrupted (^C)" and a SIGTERM killed the process (143),
against docs/reference/exit-codes.md. The command now takes both signals first of all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import copy_tree, fifo_writer, start_ingestd_run, wait_for

pytestmark = pytest.mark.slow

#: Seconds between the moment the process holds a SIGTERM handler and the signal: a spread
#: over the start (imports, config, store and model opening, the first reconcile).
DELAYS = (0.0, 0.1, 0.3, 0.6, 1.2)


def _catches_sigterm(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the process has a handler for SIGTERM (the kernel's ``SigCgt`` mask)."""
    assert proc.poll() is None, f"ingestd run ended before its handlers: {proc.returncode}"
    status = Path(f"/proc/{proc.pid}/status").read_text()
    caught = int(next(x for x in status.splitlines() if x.startswith("SigCgt:")).split()[1], 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def _assert_clean_stop(proc: subprocess.Popen[bytes], log: Path) -> None:
    try:
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert "Traceback" not in text and "Interrupted" not in text, text[-3000:]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_config_is_read_stops_run_with_exit_0(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """The config is a FIFO that the test holds open and never writes: ``run`` waits in
    the read, mid-start, for as long as the test wants; the signal interrupts it."""
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    log = tmp_path / "run.log"
    proc = start_ingestd_run(fifo, tmp_path / "state", log, ctrl_c=True)
    writer = -1
    try:

        def reader_waits() -> bool:
            nonlocal writer
            assert proc.poll() is None, log.read_text()
            fd = fifo_writer(fifo)
            writer = -1 if fd is None else fd
            return fd is not None

        wait_for(reader_waits, 120, "ingestd run to open its config", interval=0.02)
        proc.send_signal(sig)
        _assert_clean_stop(proc, log)
        assert not (tmp_path / "state").exists()  # nothing was started, nothing written
    finally:
        if writer >= 0:
            os.close(writer)


@pytest.mark.parametrize("delay", DELAYS)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_at_any_moment_of_the_start_stops_run_with_exit_0(
    tmp_path: Path, sig: signal.Signals, delay: float
) -> None:
    """From the first moment the process holds a SIGTERM handler (polled in /proc) the
    start is stopped cleanly; the later delays land in the store's opening and the first
    reconcile, where the service's own handlers stop it."""
    root = copy_tree(tmp_path / "docs")
    log = tmp_path / "run.log"
    proc = start_ingestd_run(None, tmp_path / "state", log, paths=[root], ctrl_c=True)
    try:
        wait_for(lambda: _catches_sigterm(proc), 120, "ingestd run's handlers", interval=0.005)
        if delay:
            time.sleep(delay)  # the input: a moment of the start, not a wait for an event
        proc.send_signal(sig)
    finally:
        _assert_clean_stop(proc, log)
