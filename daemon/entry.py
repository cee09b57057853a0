"""The ``ingestd`` console script: stop signals first, then the command line.

A long-running command (``run``, ``mcp``, ``ui``) promises that SIGINT or SIGTERM stops
it with status 0 whenever it comes. Its own handlers are set by the command, and the
command runs only after click and every command module are imported: tens of
milliseconds in which Python's handling applied (a SIGINT printed a
``KeyboardInterrupt`` traceback, a SIGTERM killed the process, 143). This module
imports the standard library only; :func:`main` reads the command's name from the
arguments, takes the stop signals (:mod:`~ingestd.daemon.startstop`), and only then
imports the CLI. One-shot commands keep Python's handling (Ctrl-C: ``Interrupted
(^C)``, 130).

What stays outside any handler is what runs before this module: the kernel's ``exec``
and the interpreter's own start (its ``site`` module and the ``.pth`` files of the
installed packages), a few tens of milliseconds in which a signal gets the kernel's
default action (docs/reference/exit-codes.md, "Stopping ingestd run").
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

from ingestd.daemon.startstop import LONG_RUNNING, take_stop_signals

__all__ = ["main"]


def _command(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """The subcommand's name and its arguments; ``None`` for ``--help`` or ``--version``.

    The group itself has flags only (``-h``, ``--help``, ``--version``), so the first
    argument that is not a flag names the command.
    """
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            return arg, list(args[i + 1 :])
    return None, []


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
        take_stop_signals(name, rest)
    from ingestd.daemon.cli.main import main as cli_main

    cli_main(args)
