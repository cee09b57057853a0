"""What a failure says to a program: the one line the CLI prints.

The CLI (:mod:`~ingestd.daemon.cli.shared.errors`), the :class:`~ingestd.daemon.client.Client`
and the MCP server classify errors alike, by class: a *known* failure is an
:class:`~ingestd.chunkers.errors.IngestdError` (the tree is drawn in
:mod:`ingestd.daemon.errors`: a :class:`~ingestd.daemon.wire.errors.DaemonError` from
the daemon or a shared command, a damaged or locked state dir, a missing model, an
unreachable store...), or a full disk; it is one line for the user, and its class
carries the exit code. Anything else is unexpected, and its traceback belongs in the
log.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ingestd.chunkers.errors import IngestdError
from ingestd.daemon.wire.errors import DaemonError

__all__ = ["SyncTimeout", "one_line"]


class SyncTimeout(DaemonError):
    """A ``sync`` did not finish in the time it was given (a daemon goes on with it)."""


def one_line(exc: BaseException, state_dir: Path | None = None) -> str | None:
    """The one-line message of a known failure, as the CLI prints it; ``None`` otherwise.

    Args:
        exc: the error.
        state_dir: the state dir, named in the command that rebuilds a damaged file.
    """
    from ingestd.store.common.damage import StateDamagedError, is_disk_full

    if isinstance(exc, StateDamagedError):
        words = ["ingestd", "resync", "--rebuild"]
        if state_dir is not None:
            words += ["--state-dir", str(state_dir)]
        return f"{exc}; `{shlex.join(words)}` rebuilds it"
    if isinstance(exc, IngestdError):
        return " ".join(str(exc).split())
    if is_disk_full(exc):
        detail = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        return (
            f"no space left on the device of the state dir ({detail}); nothing was lost: "
            "free some space and try again"
        )
    return None
