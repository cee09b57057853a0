"""``verify``: compare the files, the manifest and the store of the selected sources."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ingestd.daemon.commands.selection import selected_sources

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine

__all__ = ["verify"]


def verify(
    engine: Engine, sources: Sequence[str] | None = None, repair: bool = False
) -> dict[str, Any]:
    """Compare files, manifest and store for the selected sources (and repair).

    Returns:
        ``{"sources": [report...], "clean": bool}``.
    """
    reports = [engine.verify(n, repair=repair).as_dict() for n in selected_sources(engine, sources)]
    return {"sources": reports, "clean": all(r["clean"] for r in reports)}
