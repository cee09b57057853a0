"""Collections in the manifest: the profile that made their points, and their builds.

``collections`` records, per collection, the embedding model (fingerprint, dimension),
the store layout and the profile that made its points; ``collection_builds`` a new
version of a collection under construction (see :mod:`ingestd.store.vectors.versions`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, func, insert, select, update

from ingestd.chunkers.errors import ModelError
from ingestd.store.manifest.database import BD, CB, K, ManifestDatabase

__all__ = ["CollectionRecords", "ModelMismatchError"]


class ModelMismatchError(ModelError, RuntimeError):
    """A collection holds vectors of another embedding model than the configured one."""


class CollectionRecords(ManifestDatabase):
    """The ``collections`` and ``collection_builds`` rows of a manifest.

    A part of :class:`~ingestd.store.manifest.manifest.Manifest`; opens its database as
    :class:`~ingestd.store.manifest.database.ManifestDatabase` does.
    """

    def check_collection(self, name: str, model: str, fingerprint: str, dim: int) -> None:
        """Record or check the model of collection ``name``.

        Raises:
            ModelMismatchError: the collection was filled by another model.
        """
        with self.engine.begin() as conn:
            row = conn.execute(select(K).where(K.c.name == name)).first()
            if row is None:
                conn.execute(
                    insert(K).values(name=name, model=model, model_fingerprint=fingerprint, dim=dim)
                )
            elif row.model_fingerprint != fingerprint or row.dim != dim:
                raise ModelMismatchError(
                    f"collection {name!r} holds vectors of model {row.model!r} "
                    f"(fingerprint {row.model_fingerprint[:12]}, dim {row.dim}), but the "
                    f"configured model is {model!r} (fingerprint {fingerprint[:12]}, dim {dim}); "
                    "use another collection name, or `ingestd forget` its sources first"
                )

    def collection_record(self, name: str) -> dict[str, Any] | None:
        """What the manifest records of collection ``name``, or ``None``.

        Keys: ``name``, ``model``, ``model_fingerprint``, ``dim``, ``layout``,
        ``settings`` (the profile as a dict, ``None`` when written before profiles
        were recorded) and ``aborted`` (the profile of an aborted migration, or ``None``).
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(K).where(K.c.name == name)).first()
        if row is None:
            return None
        out = dict(row._mapping)
        for key in ("settings", "aborted"):
            out[key] = json.loads(out[key]) if out[key] else None
        return out

    def record_collection(self, name: str, settings: Mapping[str, Any]) -> None:
        """Record (or replace) the profile that made collection ``name``'s points.

        Args:
            name: the collection.
            settings: the profile (:meth:`ingestd.daemon.sync.profiles.profile.Profile.settings`):
                its ``model``, ``model_fingerprint`` and ``dim`` fill those columns.
        """
        values = {
            "model": str(settings["model"]),
            "model_fingerprint": str(settings["model_fingerprint"]),
            "dim": int(settings["dim"]),
            "settings": json.dumps(dict(settings), sort_keys=True),
        }
        with self.engine.begin() as conn:
            row = conn.execute(select(K.c.name).where(K.c.name == name)).first()
            if row is None:
                conn.execute(insert(K).values(name=name, **values))
            else:
                conn.execute(update(K).where(K.c.name == name).values(**values))

    def build_documents(self, collection: str) -> int:
        """Documents written into the version of ``collection`` a migration builds."""
        q = select(func.count()).select_from(BD).where(BD.c.collection == collection)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar_one())

    def set_collection_aborted(self, name: str, settings: Mapping[str, Any] | None) -> None:
        """Record the profile of an aborted migration of ``name`` (``None`` clears it)."""
        value = json.dumps(dict(settings), sort_keys=True) if settings is not None else None
        with self.engine.begin() as conn:
            conn.execute(update(K).where(K.c.name == name).values(aborted=value))

    def collection_layout(self, name: str) -> str | None:
        """The store layout collection ``name`` was last known to have.

        Returns:
            ``None`` when the manifest has no record of the collection, ``""`` when it
            was written before layouts were recorded, else the layout string.
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(K.c.layout).where(K.c.name == name)).first()
        return None if row is None else str(row.layout or "")

    def set_collection_layout(self, name: str, layout: str) -> None:
        """Record the store layout of collection ``name`` (its model row must exist)."""
        with self.engine.begin() as conn:
            conn.execute(update(K).where(K.c.name == name).values(layout=layout))

    def forget_collection(self, name: str) -> None:
        """Drop the model record of collection ``name``."""
        with self.engine.begin() as conn:
            conn.execute(delete(K).where(K.c.name == name))

    # -- collection builds -------------------------------------------------------------

    def collection_build(self, name: str) -> dict[str, Any] | None:
        """The build of a new version of collection ``name`` in progress, or ``None``.

        Keys: ``name``, ``target``, ``previous``, ``reason``, ``phase`` (``building``,
        ``switching``, or ``aborting`` for a migration), ``done_sources`` (list of
        source names), ``started_at``, ``settings`` (a migration's ``{"previous":
        profile, "target": profile}``, else ``None``).
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(CB).where(CB.c.name == name)).first()
        if row is None:
            return None
        out = dict(row._mapping)
        out["done_sources"] = json.loads(out["done_sources"] or "[]")
        out["settings"] = json.loads(out["settings"]) if out.get("settings") else None
        return out

    def start_collection_build(
        self,
        name: str,
        target: str,
        previous: str | None,
        reason: str,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        """Record that version ``target`` of collection ``name`` is being built.

        ``settings``: a migration's ``{"previous": profile, "target": profile}``.
        """
        with self.engine.begin() as conn:
            conn.execute(delete(CB).where(CB.c.name == name))
            conn.execute(
                insert(CB).values(
                    name=name,
                    target=target,
                    previous=previous,
                    reason=reason,
                    phase="building",
                    done_sources="[]",
                    started_at=self.now(),
                    settings=json.dumps(dict(settings), sort_keys=True) if settings else None,
                )
            )

    def update_collection_build(
        self, name: str, *, phase: str | None = None, done_source: str | None = None
    ) -> None:
        """Move a build to ``phase``, or record ``done_source`` as written into it."""
        with self.engine.begin() as conn:
            row = conn.execute(select(CB.c.done_sources).where(CB.c.name == name)).first()
            if row is None:
                return
            values: dict[str, Any] = {}
            if phase is not None:
                values["phase"] = phase
            if done_source is not None:
                done = set(json.loads(row.done_sources or "[]")) | {done_source}
                values["done_sources"] = json.dumps(sorted(done))
            conn.execute(update(CB).where(CB.c.name == name).values(**values))

    def end_collection_build(self, name: str) -> None:
        """Forget the build of collection ``name`` (it is complete)."""
        with self.engine.begin() as conn:
            conn.execute(delete(CB).where(CB.c.name == name))
