"""What the status and migration reports read from a manifest, as one small Protocol.

Two classes implement it: :class:`~ingestd.store.manifest.Manifest` (SQLAlchemy, any
database URL) and the SQLAlchemy-free :class:`~ingestd.store.manifest_view.ManifestView`
(SQLite only, for commands that must answer within a fraction of a second).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ManifestReader"]


class ManifestReader(Protocol):
    """What :func:`~ingestd.daemon.commands.commands.status_of` reads.

    A :class:`~ingestd.store.manifest.Manifest`, or the SQLAlchemy-free
    :class:`~ingestd.store.manifest_view.ManifestView`.
    ``ingestd status`` reads through it without importing SQLAlchemy.
    """

    def sources(self) -> list[dict[str, Any]]:
        """Recorded sources (``name``, ``root``, ``collection``, ``last_sync``, ...)."""
        ...

    def counts(self, source: str) -> dict[str, int]:
        """``documents``, ``chunks``, ``pending``, ``failed`` of a source."""
        ...

    def failed(self, source: str) -> list[tuple[str, str]]:
        """``(path, error)`` of failed documents."""
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
