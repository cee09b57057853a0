"""What reading a manifest offers, with or without SQLAlchemy.

:class:`ManifestReader` is the part of a manifest that ``ingestd status`` (and the
source-name checks of other commands) read. Two classes provide it: the full
:class:`~ingestd.store.manifest.manifest.Manifest`, and the SQLAlchemy-free
:class:`~ingestd.store.manifest.view.ManifestView` for a SQLite file. This module
imports nothing but the standard library's typing, so that a command that only reads stays fast.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

__all__ = ["SOURCE_POINTS_SQL", "ManifestReader"]

#: The points a source's documents hold, committed and pending apart (bind ``:source``;
#: rows of ``(pending, points)``). Distinct point ids: a chunk that several versions of
#: a versioned source hold at the same path is one point, however many documents (one
#: per version) record it. The one definition of what the store should hold for a
#: source, read by the writer's store check
#: (:meth:`~ingestd.store.manifest.sources.SourceRecords.collection_counts`) and by
#: ``status`` with or without SQLAlchemy (:meth:`ManifestReader.counts`).
SOURCE_POINTS_SQL = (
    "SELECT c.pending, count(DISTINCT c.point_id) FROM chunks c "
    "JOIN documents d ON d.id = c.doc_id WHERE d.source = :source GROUP BY c.pending"
)


class ManifestReader(Protocol):
    """What :func:`~ingestd.daemon.commands.status.status_of` reads.

    A :class:`~ingestd.store.manifest.manifest.Manifest`, or the SQLAlchemy-free
    :class:`~ingestd.store.manifest.view.ManifestView`.
    """

    #: the SQLite file it reads, ``None`` for another database
    path: Path | None

    def sources(self) -> list[dict[str, Any]]:
        """Recorded sources (``name``, ``root``, ``collection``, ``last_sync``, ...)."""
        ...

    def counts(self, source: str) -> dict[str, int]:
        """``documents``, ``chunks``, ``pending``, ``failed`` of a source.

        ``chunks`` and ``pending`` count points (:data:`SOURCE_POINTS_SQL`).
        """
        ...

    def seed_counts(self, counts: Mapping[str, Mapping[str, int]]) -> None:
        """Take counts known to be current (a clean close's, the manifest unchanged since)."""
        ...

    def integrity_problem(self) -> str | None:
        """What SQLite's ``PRAGMA quick_check`` finds wrong (``None``: nothing, or not SQLite)."""
        ...

    def documents_under(self, source: str, folder: str) -> int:
        """How many documents of ``source`` lie below ``folder`` (relative POSIX path)."""
        ...

    def failed(self, source: str) -> list[tuple[str, str]]:
        """``(path, error)`` of failed documents."""
        ...

    def partly_skipped(self, source: str) -> list[tuple[str, str]]:
        """``(path, note)`` of indexed documents that lost chunks (not prose)."""
        ...

    def collection_record(self, name: str) -> dict[str, Any] | None:
        """What is recorded of a collection (its profile, an aborted migration)."""
        ...

    def collection_build(self, name: str) -> dict[str, Any] | None:
        """The build of a new version of a collection in progress, or ``None``."""
        ...

    def build_documents(self, collection: str) -> int:
        """Documents written into the version of ``collection`` being built."""
        ...
