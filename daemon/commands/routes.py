"""Which control commands the daemon answers, where each runs and how urgently.

:data:`ROUTES` is the one table the service's dispatch reads: a command that runs
through the daemon is added there, and nowhere else.

* Most commands run on the engine thread (it owns the store and the model), queued as
  a job: ``fn(engine, **args)``. ``search``, ``read`` and ``migrate`` (abort, restart:
  quick) are urgent: they are also served at the checkpoints of long work, a
  migration's included. The others wait for the running job, ahead of queued scans:
  ``sync`` is a barrier because of that (see :mod:`~ingestd.daemon.commands.index.sync`).
* A few are answered at once on the control thread, even while a long job (a resync,
  an ``eval``) holds the engine thread: ``fn(daemon, **args)``. They read the
  manifest at most, never the store: ``status``, and the progress and cancelling of
  a running ``eval``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from ingestd.daemon.commands.evaluate import evaluate
from ingestd.daemon.commands.index import sync
from ingestd.daemon.commands.index.forget import forget
from ingestd.daemon.commands.index.migrate import migrate
from ingestd.daemon.commands.index.resync import resync
from ingestd.daemon.commands.index.verify import verify
from ingestd.daemon.commands.query import read
from ingestd.daemon.commands.query.chunks import chunks
from ingestd.daemon.commands.query.search import wire_answer
from ingestd.daemon.evaluation.runs import eval_cancel, eval_progress

__all__ = ["ROUTES", "Daemon", "Priority", "Route", "Thread"]


class Priority(enum.IntEnum):
    """How urgently a command runs: the order of jobs in the service's queue.

    Lower first, then first come first served (the queue,
    :class:`~ingestd.daemon.service.jobs.JobQueue`, orders every job by it).
    """

    URGENT = 0
    """Searches, quick commands, wake-ups: also run at the checkpoints of long work."""
    CHANGES = 1
    """Change batches of files and most commands."""
    SCAN = 2
    """Scans of whole sources (start-up, reload, rescans)."""


class Thread(enum.Enum):
    """Which thread runs a control command, and what its function is given first."""

    ENGINE = "engine"
    """Queued as a job at the route's priority; ``fn(engine, **args)``."""
    CONTROL = "control"
    """Answered at once on the control server's thread; ``fn(daemon, **args)``."""


class Daemon(Protocol):
    """What a command answered on the control thread may ask of the running daemon."""

    def status(self) -> dict[str, Any]:
        """The daemon's status (manifest reads only)."""
        ...


@dataclass(frozen=True)
class Route:
    """How the daemon runs one control command."""

    fn: Callable[..., Any]
    """The command: ``fn(engine, **args)`` or ``fn(daemon, **args)`` (see :attr:`thread`)."""
    thread: Thread = Thread.ENGINE
    """Where it runs."""
    priority: Priority = Priority.CHANGES
    """Its job's priority on the engine thread (:attr:`Priority.URGENT
    <ingestd.daemon.commands.routes.Priority.URGENT>`: also at checkpoints of long work)."""
    rescans: bool = False
    """The sources its result names under ``rescan`` are scanned afterwards."""


def _status(daemon: Daemon, **_ignored: Any) -> dict[str, Any]:
    return daemon.status()


def _eval_progress(_daemon: Daemon, run: str) -> dict[str, Any] | None:
    return eval_progress(run)


def _eval_cancel(_daemon: Daemon, run: str) -> dict[str, bool]:
    return eval_cancel(run)


#: Control command name -> how the daemon runs it.
ROUTES: Mapping[str, Route] = MappingProxyType(
    {
        "status": Route(_status, Thread.CONTROL),
        "search": Route(wire_answer, priority=Priority.URGENT),
        "read": Route(read.read, priority=Priority.URGENT),
        "chunks": Route(chunks, priority=Priority.URGENT),
        "sync": Route(sync.sync),
        "resync": Route(resync),
        "verify": Route(verify),
        "forget": Route(forget),
        "migrate": Route(migrate, priority=Priority.URGENT, rescans=True),
        "eval": Route(evaluate),
        "eval-progress": Route(_eval_progress, Thread.CONTROL),
        "eval-cancel": Route(_eval_cancel, Thread.CONTROL),
    }
)
