"""Ctrl-C and SIGTERM stop ``ingestd mcp`` on stdio with status 0, whenever they land.

Python runs a signal's handler only when the main thread runs bytecode; the stdio
server's main thread waits in the event loop's ``epoll_wait(2)``. A signal landing
between the loop's last look and that wait was held until the client sent something:
with an idle client, never. The C-level handler now also writes to a wakeup fd that a
thread reads (:mod:`ingestd.daemon.mcpserver.stop`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ingestd_cmd

#: A main thread that never runs bytecode again: SIGINT and SIGTERM blocked in it (so the
#: kernel gives them to another thread, and the C handler only flags them for the main
#: thread), then a read that nothing ever answers: the lost window, held open.
NEVER_WAKES = """
import os, signal, sys
from ingestd.daemon.mcpserver.stop import STOP_SIGNALS, exit_on_stop_signals
exit_on_stop_signals(0)
signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
r, _w = os.pipe()
print("ready", flush=True)
os.read(r, 1)
sys.exit(5)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_the_main_thread_never_acts_on_still_exits_0(sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", NEVER_WAKES], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_idle_stdio_server_stops_on_a_signal_with_status_0(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A real ``ingestd mcp``: initialized, then idle with stdin open; the signal ends it."""
    proc = subprocess.Popen(
        [*ingestd_cmd(), "mcp", "--state-dir", str(tmp_path / "state")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "ingestd"
        proc.send_signal(sig)  # stdin stays open: nothing else wakes the server
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read() == b""
        assert "Traceback" not in proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()
