"""The ``ingestd`` console script: stop signals first, then the command line.

A long-running command (``run``, ``mcp``, ``ui``) promises that SIGINT or SIGTERM stops
it with status 0 whenever it comes. Its own handlers are set by the command, and the
command runs only after click and every command module are imported: tens of
milliseconds in which Python's handling applied (a SIGINT printed a
``KeyboardInterrupt`` traceback, a SIGTERM killed the process, 143). This module
imports the standard library only; :func:`main` reads the command's name from the
arguments, takes the stop signals, and only then imports the CLI. One-shot commands
keep Python's handling (Ctrl-C: ``Interrupted (^C)``, 130).

What stays outside any handler is what runs before this module: the kernel's ``exec``
and the interpreter's own start (its ``site`` module and the ``.pth`` files of the
installed packages), a few milliseconds in which a signal gets the kernel's default
action (docs/reference/exit-codes.md, "Stopping ingestd run").
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType

__all__ = ["LONG_RUNNING", "main", "stop_before_start"]

#: The commands that run until stopped: a stop signal ends them with status 0.
LONG_RUNNING = frozenset({"run", "mcp", "ui"})

#: SIGHUP (reload the config) seen before ``run``'s service took over; one per process.
_hup = threading.Event()


def _command(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """The subcommand's name and its arguments; ``None`` for ``--help`` or ``--version``.

    The group itself has flags only (``-h``, ``--help``, ``--version``), so the first
    argument that is not a flag names the command.
    """
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            return arg, list(args[i + 1 :])
    return None, []


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
        An event set when SIGHUP arrived meanwhile (since :func:`main` took the
        signals, when it did).
    """
    if threading.current_thread() is not threading.main_thread():
        yield threading.Event()
        return
    signals = {signal.SIGHUP: _keep_hup, signal.SIGINT: _leave, signal.SIGTERM: _leave}
    before = {sig: signal.signal(sig, handler) for sig, handler in signals.items()}
    try:
        yield _hup
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _take_stop_signals(name: str, args: Sequence[str]) -> None:
    """Set the early handlers of the long-running command ``name``, before any import."""
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


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``ingestd``, ``python -m ingestd.daemon``).

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    name, rest = _command(args)
    if (
        name in LONG_RUNNING
        and "--help" not in rest
        and "-h" not in rest
        and threading.current_thread() is threading.main_thread()
    ):
        _take_stop_signals(name, rest)
    from ingestd.daemon.cli.main import main as cli_main

    cli_main(args)
