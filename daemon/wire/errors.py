"""The failures of a request to the daemon: it answered with an error, or nobody answers.

:class:`DaemonError` is also how a command shared by the daemon and the local path says
a known failure (an unknown source, bad arguments) with its exit code, whichever side
runs it; the control socket carries its message and exit code back unchanged.
"""

from __future__ import annotations

from ingestd.chunkers.errors import IngestdError, UnavailableError

__all__ = ["DaemonError", "NoDaemon"]


class DaemonError(IngestdError):
    """A command failed with a known failure; the daemon answered with this error.

    Args:
        message: the one line the CLI prints.
        exit_code: the CLI's exit status (2: bad arguments; 130: cancelled).
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class NoDaemon(UnavailableError):
    """No daemon answers on this state dir's control socket."""
