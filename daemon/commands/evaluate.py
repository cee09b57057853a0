"""``eval`` in the daemon: the control command that runs an evaluation on its engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine

__all__ = ["evaluate"]


def evaluate(engine: Engine, **args: Any) -> dict[str, Any]:
    """``ingestd eval`` in the daemon: see :func:`ingestd.daemon.evaluation.runs.run_in_daemon`."""
    from ingestd.daemon.evaluation.runs import run_in_daemon

    return run_in_daemon(engine, **args)
