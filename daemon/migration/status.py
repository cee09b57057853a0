"""What ``status`` says of migrations, read without SQLAlchemy, torch or qdrant-client.

``ingestd status`` answers within a fraction of a second from the manifest alone
(:class:`~ingestd.store.manifest_view.ManifestView`), so what it shows of a migration
(:mod:`ingestd.daemon.migration.migrate`) is read here through the small
:class:`~ingestd.daemon.commands.commands.ManifestReader` interface, with the pure helpers that
name a profile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingestd.daemon.commands.commands import ManifestReader
    from ingestd.daemon.sync.engine import Engine

__all__ = ["MIGRATE", "describe", "migration_build", "recorded_settings", "status"]

#: The reason recorded in ``collection_builds`` for a migration's build (the same as
#: :data:`ingestd.store.collections.MIGRATE`, which this module may not import).
MIGRATE = "migrate"


def migration_build(manifest: ManifestReader, collection: str) -> dict[str, Any] | None:
    """The recorded build of a migration of ``collection``, or ``None``."""
    build = manifest.collection_build(collection)
    if build is None or build["reason"] != MIGRATE or not build["settings"]:
        return None
    return build


def describe(settings: Mapping[str, Any]) -> str:
    """One line naming a profile: ``model NAME (fingerprint F, dim D), tokenizer T, ...``."""
    extra = "".join(
        f", {k} {v}" for k, v in sorted((settings.get("embedding") or {}).items()) if k != "model"
    )
    return (
        f"model {settings['model']} (fingerprint {str(settings['model_fingerprint'])[:12]}, "
        f"dim {settings['dim']}{extra}), tokenizer {settings['tokenizer']}, "
        f"fit_model {'on' if settings['fit_model'] else 'off'}"
    )


def recorded_settings(record: Mapping[str, Any], configured: Mapping[str, Any]) -> dict[str, Any]:
    """The profile a manifest record of a collection says made its points.

    A record written before profiles were recorded knows only the model: its tokenizer
    and ``fit_model`` are taken to be the configured ones (a change of those made
    before the upgrade re-chunks documents in place, by their rule fingerprints).
    """
    settings = record.get("settings")
    if settings:
        return dict(settings)
    return {
        "model": record["model"],
        "embedding": {"model": record["model"]},
        "model_fingerprint": record["model_fingerprint"],
        "dim": record["dim"],
        "tokenizer": configured["tokenizer"],
        "fit_model": configured["fit_model"],
    }


def status(manifest: ManifestReader, engine: Engine | None = None) -> list[dict[str, Any]]:
    """Migrations under way, waiting or aborted, one entry per collection (for ``status``)."""
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
            running = engine.migrations.get(name) if engine is not None else None
            if running is not None:
                entry.update(running.progress.as_dict())
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
