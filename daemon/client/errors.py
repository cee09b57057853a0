"""What a failure says to a program: the one line the CLI prints, and its kind.

The CLI (:mod:`~ingestd.daemon.cli.errors`), the :class:`~ingestd.daemon.client.Client`
and the MCP server classify errors alike: a *known* failure (a
:class:`~ingestd.daemon.wire.errors.DaemonError` from the daemon or a shared
command, a damaged state file, a missing model, an unreachable store, a locked state
dir, a full disk) is one line for the user; anything else is unexpected, and its
traceback belongs in the log.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ingestd.daemon.wire.errors import DaemonError

__all__ = ["KNOWN_FAILURES", "SyncTimeout", "known_failure", "one_line"]

#: Exceptions that are a known failure (one line, exit code 1), by module: the modules
#: are never imported just to classify an error (a fast command never loads them).
KNOWN_FAILURES = (
    ("ingestd.store.manifest.manifest", "ModelMismatchError"),
    ("ingestd.store.embedding.embedder", "ModelNotFoundError"),
    ("ingestd.chunkers.sizing.tokenizers", "TokenizerError"),
    ("ingestd.store.vectors.base", "StoreUnavailableError"),
    ("ingestd.daemon.wire.statelock", "StateLockedError"),
    ("ingestd.daemon.wire.errors", "NoDaemon"),
)


class SyncTimeout(DaemonError):
    """A ``sync`` did not finish in the time it was given (a daemon goes on with it)."""


def known_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is one of :data:`KNOWN_FAILURES`."""
    for module, name in KNOWN_FAILURES:
        mod = sys.modules.get(module)
        if mod is not None and isinstance(exc, getattr(mod, name)):
            return True
    return False


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
    if isinstance(exc, DaemonError) or known_failure(exc):
        return " ".join(str(exc).split())
    if is_disk_full(exc):
        detail = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        return (
            f"no space left on the device of the state dir ({detail}); nothing was lost: "
            "free some space and try again"
        )
    return None
