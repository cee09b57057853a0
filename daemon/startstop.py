"""SIGINT and SIGTERM while a long-running command starts: exit 0 at once.

Nothing is locked, opened or written before a long-running command (``run``, ``mcp``,
``ui``) installs its own handlers, so a stop requested in its start is complete without
any work. The console script (:mod:`~ingestd.daemon.entry`) takes the signals before it
imports the command line, and ``run`` again for a caller that did not
(:func:`stop_before_start`). Standard library only: this runs before any other import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType

__all__ = ["LONG_RUNNING", "stop_before_start", "take_stop_signals"]

#: The commands that run until stopped: a stop signal ends them with status 0.
LONG_RUNNING = frozenset({"run", "mcp", "ui"})

#: SIGHUP (reload the config) seen before ``run``'s service took over; one per process.
_hup = threading.Event()


def _leave(_sig: int, _frame: FrameType | None) -> None:
    try:
        sys.stderr.flush()
    finally:
        os._exit(0)


def _keep_hup(_sig: int, _frame: FrameType | None) -> None:
    _hup.set()


@contextlib.contextmanager
def stop_before_start() -> Iterator[threading.Event]:
    """Until the command's own handlers take over, SIGINT and SIGTERM exit 0 at once.

    Nothing is locked, opened or written before a long-running command installs its
    own handlers (``run``'s service: finish the write in flight), so a stop requested
    in its start is complete without any work: :func:`os._exit` with status 0, never
    Python's ``KeyboardInterrupt`` (exit 130) or SIGTERM's default action (killed, 143).
    SIGHUP is remembered, for ``run`` to reload the config it may have read too early.
    The handlers in place before are put back on the way out (a command run in-process,
    by a test, that failed to start); off the main thread nothing is installed (only the
    main thread may set handlers).

    Yields:
        An event set when SIGHUP arrived meanwhile (since the console script took the
        signals, when it did: :func:`take_stop_signals`).
    """
    if threading.current_thread() is not threading.main_thread():
        yield threading.Event()
        return
    if signal.getsignal(signal.SIGHUP) is not _keep_hup:
        _hup.clear()  # not taken by the console script: a SIGHUP before is not ours
    signals = {signal.SIGHUP: _keep_hup, signal.SIGINT: _leave, signal.SIGTERM: _leave}
    before = {sig: signal.signal(sig, handler) for sig, handler in signals.items()}
    try:
        yield _hup
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def take_stop_signals(name: str, args: Sequence[str]) -> None:
    """Take SIGINT and SIGTERM for the long-running command ``name``: exit 0 at once.

    ``mcp`` on stdio gets :func:`~ingestd.daemon.mcpserver.stop.exit_on_stop_signals`
    (the handlers that also wake its wait); ``run`` also remembers SIGHUP.

    Args:
        name: ``run``, ``mcp`` or ``ui``.
        args: the command's arguments (``--http`` makes ``mcp`` a server of HTTP).

    Raises:
        ValueError: not called from the main thread.
    """
    if name == "mcp" and not any(a == "--http" or a.startswith("--http=") for a in args):
        # on stdio the server waits where a Python handler may never run: the handlers
        # that also wake that wait (stdlib only, like this module)
        from ingestd.daemon.mcpserver.stop import exit_on_stop_signals

        exit_on_stop_signals(0)
        return
    for sig, handler in ((signal.SIGINT, _leave), (signal.SIGTERM, _leave)):
        signal.signal(sig, handler)
    if name == "run":
        signal.signal(signal.SIGHUP, _keep_hup)
