"""Which configured sources a command works on: the one check every command shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine

__all__ = ["selected_sources"]


def selected_sources(engine: Engine, sources: Sequence[str] | None) -> list[str]:
    """The names of ``sources``, all the engine's when ``None`` or empty.

    Raises:
        DaemonError: exit code 2, a source the engine does not know, of the config or
            (without one) of the state dir (the message lists those it knows).
    """
    if not sources:
        return list(engine.context.sources)
    unknown = [s for s in sources if s not in engine.context.sources]
    if unknown:
        raise DaemonError(
            f"unknown source(s): {', '.join(unknown)}; "
            f"known sources: {', '.join(engine.context.sources)}",
            2,
        )
    return list(sources)
