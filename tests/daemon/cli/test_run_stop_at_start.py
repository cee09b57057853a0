"""``ingestd run`` stopped by SIGINT or SIGTERM while it starts: exit 0, nothing printed.

The service installs its own handlers (finish the write in flight, exit 0) once its
imports and the config are done, about half a second in; before this fix a Ctrl-C in
that time exited 130 with "Interrupted (^C)" and a SIGTERM killed the process (143),
against docs/reference/exit-codes.md. The command now takes both signals first of all.

Then the console script itself: the command ran only after click and every command module
were imported (10 to 80 ms), and a signal there got Python's handling (a SIGINT printed a
``KeyboardInterrupt`` traceback, a SIGTERM killed with 143). The script's entry
(``ingestd.daemon.entry``) now takes the stop signals of the long-running commands before
it imports anything but the standard library. What no code of ingestd can cover is the
kernel's ``exec`` and the interpreter's own start (``site`` and the ``.pth`` files): a
signal there gets the kernel's default action, silently.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import copy_tree, start_ingestd_run, wait_fifo_reader, wait_for

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


def _ended(proc: subprocess.Popen[bytes], log: Path) -> tuple[int, str]:
    """The exit code of ``proc`` (killed past 120 s) and what it wrote to ``log``."""
    try:
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, log.read_text(errors="replace")


def _assert_clean_stop(proc: subprocess.Popen[bytes], log: Path) -> None:
    code, text = _ended(proc, log)
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
        writer = wait_fifo_reader(
            fifo, proc, "ingestd run to open its config", log.read_text, interval=0.02
        )
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


#: A console script that records the handlers in place when click is first imported
#: (where the command line starts), prints them and leaves: nothing is started.
SPY = textwrap.dedent(
    """
    import importlib.abc, importlib.metadata, os, signal, sys

    class Spy(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "click":
                caught = [
                    signal.getsignal(s) not in (signal.SIG_DFL, signal.default_int_handler)
                    for s in (signal.SIGINT, signal.SIGTERM)
                ]
                print("caught", *caught, flush=True)
                os._exit(0)
            return None

    sys.meta_path.insert(0, Spy())
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="ingestd")
    sys.argv = ["ingestd", *sys.argv[1:]]
    sys.exit(script.load()())
    """
)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--state-dir", "STATE", "."],
        ["mcp", "--state-dir", "STATE"],
        ["mcp", "--http", "127.0.0.1:0", "--state-dir", "STATE"],
        ["ui", "--listen", "127.0.0.1:0", "--state-dir", "STATE"],
    ],
    ids=["run", "mcp-stdio", "mcp-http", "ui"],
)
def test_the_console_script_takes_the_stop_signals_before_it_imports_the_cli(
    tmp_path: Path, args: list[str]
) -> None:
    """Before any import of click (the first heavy import of the command line), SIGINT
    and SIGTERM have handlers of ingestd's: a stop in the imports is a clean exit 0."""
    args = [str(tmp_path / "state") if a == "STATE" else a for a in args]
    proc = subprocess.run(
        [sys.executable, "-c", SPY, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        # as a terminal starts it (a parallel test worker ignores SIGINT)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["caught", "True", "True"], proc.stdout + proc.stderr
    assert not (tmp_path / "state").exists()


def test_a_one_shot_command_keeps_pythons_ctrl_c(tmp_path: Path) -> None:
    """``status`` and the other one-shot commands print ``Interrupted (^C)`` (130): the
    console script takes no signal for them."""
    proc = subprocess.run(
        [sys.executable, "-c", SPY, "status", "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout.split() == ["caught", "False", "False"], proc.stdout + proc.stderr


#: Seconds after the spawn: the input, a spread over the kernel's exec, the interpreter's
#: start and the imports of the command line (from 0: the moment ``Popen`` returns).
SPAWN_OFFSETS = (0.0, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08)


def _start_on_docs(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """``ingestd run`` over a copy of the test docs, started as a terminal starts it."""
    root = copy_tree(tmp_path / "docs")
    log = tmp_path / "run.log"
    return start_ingestd_run(None, tmp_path / "state", log, paths=[root], ctrl_c=True), log


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_right_after_the_spawn_never_prints_a_traceback(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Sent the moment the process exists: before a line of ingestd runs, the signal
    gets the kernel's default action (killed by it, nothing printed); from ingestd's
    first line on, exit 0. Never a traceback or ``Interrupted``."""
    proc, log = _start_on_docs(tmp_path)
    proc.send_signal(sig)
    _assert_clean_or_unstarted(proc, log, sig)


@pytest.mark.parametrize("offset", SPAWN_OFFSETS)
def test_a_sigterm_at_any_moment_after_the_spawn_stops_run_cleanly(
    tmp_path: Path, offset: float
) -> None:
    """SIGTERM, as systemd sends it, at a spread of moments from the spawn on: exit 0 from
    ingestd's first line, the kernel's default action before it; never a traceback."""
    proc, log = _start_on_docs(tmp_path)
    if offset:
        time.sleep(offset)  # the input: a moment of the start, not a wait for an event
    proc.send_signal(signal.SIGTERM)
    _assert_clean_or_unstarted(proc, log, signal.SIGTERM)


def _assert_clean_or_unstarted(
    proc: subprocess.Popen[bytes], log: Path, sig: signal.Signals
) -> None:
    code, text = _ended(proc, log)
    assert "Traceback" not in text and "Interrupted" not in text, text[-3000:]
    assert code == 0 or (code == -sig and not text), (code, text[-3000:])
