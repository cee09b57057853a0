"""What ``status`` says of migrations, read without SQLAlchemy, torch or qdrant-client.

``ingestd status`` answers within a fraction of a second from the manifest alone
(:class:`~ingestd.store.manifest.view.ManifestView`), so what it shows of a migration
(:mod:`ingestd.daemon.migration.migrate`) is read here through the small
:class:`~ingestd.store.manifest.reader.ManifestReader` interface, with the pure helpers that
name a profile (:mod:`ingestd.daemon.sync.profiles.settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ingestd.daemon.sync.profiles.settings import describe, recorded_settings

if TYPE_CHECKING:
    from ingestd.store.manifest.reader import ManifestReader

__all__ = ["MIGRATE", "migration_build", "status"]

#: The reason recorded in ``collection_builds`` for a migration's build (the same as
#: :data:`ingestd.store.vectors.versions.MIGRATE`, which this module may not import).
MIGRATE = "migrate"


def migration_build(manifest: ManifestReader, collection: str) -> dict[str, Any] | None:
    """The recorded build of a migration of ``collection``, or ``None``."""
    build = manifest.collection_build(collection)
    if build is None or build["reason"] != MIGRATE or not build["settings"]:
        return None
    return build


def status(
    manifest: ManifestReader, running: Mapping[str, Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Migrations under way, waiting or aborted, one entry per collection (for ``status``).

    Args:
        manifest: the manifest (or its SQLAlchemy-free view).
        running: progress of the migrations running in this process, by collection
            (``BuildProgress.as_dict()``); it adds ``docs_done``, ``eta_seconds``, ...
    """
    out = []
    for name in sorted({s["collection"] for s in manifest.sources()}):
        build = migration_build(manifest, name)
        rec = manifest.collection_record(name)
        if build is not None:
            settings = build["settings"]
            entry: dict[str, Any] = {
                "collection": name,
                "phase": build["phase"],
                "from": describe(settings["previous"]),
                "to": describe(settings["target"]),
                "version": build["target"],
                "current_version": build["previous"],
                "started_at": build["started_at"],
                "docs_done": manifest.build_documents(name),
                "docs_total": sum(
                    manifest.counts(s["name"])["documents"]
                    for s in manifest.sources()
                    if s["collection"] == name
                ),
            }
            if running is not None and name in running:
                entry.update(running[name])
            out.append(entry)
        elif rec is not None and rec.get("aborted"):
            out.append(
                {
                    "collection": name,
                    "phase": "aborted",
                    "to": describe(rec["aborted"]),
                    "from": describe(recorded_settings(rec, rec["aborted"])),
                }
            )
    return out
