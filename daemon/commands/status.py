"""``status``: per source documents, chunks, failures and last sync; the daemon's counters.

:func:`status_of` is the part the running daemon and the state dir alone share;
:func:`local_status` is ``status`` with no daemon running.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ingestd.daemon.sources.shown import recorded_status, shown_by
from ingestd.daemon.statedir import StatePaths, state_dir_bytes

if TYPE_CHECKING:
    from ingestd.daemon.config import Config
    from ingestd.daemon.engine import Engine
    from ingestd.store.manifest.reader import ManifestReader

__all__ = ["local_status", "manifest_lost", "status_of"]


def status_of(
    manifest: ManifestReader,
    engine: Engine | None,
    state_dir: Path,
    configured: Collection[str] | None = None,
    folders: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Per-source documents, chunks, failures, last sync; counters when ``engine`` runs.

    ``configured``: the names of the sources the config has, when there is no engine
    (the engine's are its sources); ``None``: not known. ``folders``: the state dir's
    folders' sizes as last measured (folder -> bytes), when there is no engine (the
    engine's are :meth:`~ingestd.daemon.sync.state.resources.Resources.folder_bytes`):
    a folder not given is walked.

    Returns:
        ``{"state_dir", "sources": [...], "disk": {...}}`` and, with an engine,
        ``rule_warnings`` and ``unused_rules`` (rules the user wrote only),
        ``embedded_since_start``, ``reused_since_start`` and ``model``. Each source has
        ``source``, ``root``, ``root_missing`` (its folder is not there: unmounted,
        moved or deleted), ``collection``, ``documents``, ``chunks``, ``pending``,
        ``failed``, ``last_sync`` (the end of the last complete sync, seconds since
        the epoch, or ``None``), ``last_change_synced`` (when a sync last wrote or
        deleted a document, a watched edit's included), ``held_deletes``,
        ``configured`` (when known: ``false`` for a source the config no longer has,
        whose points still answer searches until ``ingestd forget``),
        ``failed_documents`` (at most 50), ``partly_skipped`` (indexed documents whose
        chunks that are not prose were left out), ``partly_skipped_documents`` (at most
        50: ``path`` and ``note``, the count of chunks left out) and ``warnings`` (likely
        mistakes: include globs that match no file; files indexed by another source
        too, a source left in the state by an older config or ``resync PATH``). Its kind
        adds its own keys (:func:`~ingestd.daemon.sources.shown.recorded_status`): a git
        source adds
        ``refs`` (its versions: ``version``, ``ref``, ``commit``), ``fetched_at``,
        ``failing_since`` and ``fetch_error`` (see
        :func:`~ingestd.daemon.sources.mirror.mirror_status`).
    """
    sources = []
    for s in manifest.sources():
        counts = manifest.counts(s["name"])
        entry: dict[str, Any] = {
            "source": s["name"],
            "root": s["root"],
            "root_missing": not os.path.isdir(s["root"]),
            "collection": s["collection"],
            **counts,
            "last_sync": s["last_sync"],
            "last_change_synced": s.get("last_change_synced"),
            "held_deletes": int(s.get("held_deletes") or 0),
            "failed_documents": [
                {"path": p, "error": e} for p, e in manifest.failed(s["name"])[:50]
            ],
        }
        partial = manifest.partly_skipped(s["name"]) if counts.get("partly_skipped") else []
        entry["partly_skipped_documents"] = [{"path": p, "note": n} for p, n in partial[:50]]
        entry.update(recorded_status(Path(s["root"])))  # its kind's keys (a git source's refs)
        if engine is not None and s["name"] in engine.context.sources:
            _configured_origin(entry, engine)
            entry["retrying"] = engine.failures.retrying(s["name"])
            entry["skipped"] = engine.failures.skipped_entries(s["name"])
        names = set(engine.context.sources) if engine is not None else configured
        if names is not None:
            entry["configured"] = s["name"] in names
        entry["warnings"] = _source_warnings(entry, engine)
        sources.append(entry)
    _overlap_warnings(manifest, sources)
    out: dict[str, Any] = {
        "state_dir": str(state_dir),
        "sources": sources,
        "disk": {
            "state_dir_bytes": state_dir_bytes(
                state_dir, engine.resources.folder_bytes() if engine is not None else folders
            ),
            "embedding_cache_bytes": sum(
                p.stat().st_size
                for p in StatePaths.sqlite_files(StatePaths(state_dir).embeddings)[:2]
                if p.exists()
            ),
        },
    }
    if engine is not None:
        out["rule_warnings"] = list(engine.profiles.profile.rule_warnings)
        paths = [p for s in engine.context.sources for p in engine.resources.manifest.documents(s)]
        out["unused_rules"] = engine.profiles.profile.rules.unmatched(paths) if paths else []
        out["embedded_since_start"] = engine.profiles.profile.embedder.stats.embedded
        out["reused_since_start"] = engine.profiles.profile.embedder.stats.reused
        out["model"] = {
            "name": engine.profiles.profile.model.name,
            "backend": engine.profiles.profile.model.backend,
            "fingerprint": engine.profiles.profile.model.fingerprint[:16],
        }
        if (
            engine.profiles.profile.model.endpoint is not None
        ):  # where it answers (never the API key)
            out["model"]["url"] = engine.profiles.profile.model.endpoint.url
    from ingestd.daemon.migration import status as migration_status

    running = engine.collections.running() if engine is not None else None
    out["migrations"] = migration_status.status(manifest, running)
    if engine is not None and not engine.cfg.manifest.url:
        path = engine.cfg.paths(state_dir).manifest
        if not path.exists():  # deleted under the daemon: it writes to an unlinked file
            out["manifest_lost"] = {"manifest": str(path), "missing": True, "running": True}
    return out


def manifest_lost(
    manifest: ManifestReader | None, state_dir: Path, cfg: Config | None
) -> dict[str, Any] | None:
    """What ``status`` says of a manifest that records nothing while the store holds points.

    A deleted ``manifest.db`` (or one written afresh) leaves every point of the
    embedded store unknown: "nothing indexed" would be false. Cheap: the manifest's
    sources are listed, and only when it has none are the store's points counted
    (:func:`~ingestd.daemon.sync.healing.holdings.unrecorded_points`: from the
    clean-close record or the files, never reading a point).

    Args:
        manifest: the manifest, ``None`` when its file is missing.
        state_dir: the state dir.
        cfg: the config, or ``None``.

    Returns:
        ``None`` when the manifest records sources or the store holds no point; else
        ``manifest`` (its file; ``None`` for a ``manifest.url`` database), ``missing``
        (its file is gone), ``points`` (their sum; ``None`` when a collection's cannot be
        counted without opening the store) and ``collections`` (physical -> points).
    """
    from ingestd.daemon.sync.healing.holdings import unrecorded_points

    if manifest is not None and manifest.sources():
        return None
    held = unrecorded_points(cfg, state_dir)
    if not held:
        return None
    url = cfg is not None and bool(cfg.manifest.url)
    path = None if url else (cfg.paths(state_dir) if cfg else StatePaths(state_dir)).manifest
    counts = list(held.values())
    return {
        "manifest": None if path is None else str(path),
        "missing": manifest is None,
        "points": None if None in counts else sum(c or 0 for c in counts),
        "collections": held,
    }


def local_status(
    manifest: ManifestReader | None, state_dir: Path, configured: Collection[str] | None = None
) -> dict[str, Any]:
    """``status`` with no daemon running: :func:`status_of` the manifest, ``daemon`` null.

    The counts are those of the last clean close when the manifest's file is unchanged
    since (:func:`~ingestd.daemon.sync.state.clean_close.seed_counts`): nothing is counted;
    so are the sizes of the state dir's folders (the store's thousands of files are not
    walked: :func:`~ingestd.daemon.sync.state.clean_close.recorded_folder_bytes`).

    Args:
        manifest: the manifest, or ``None`` when nothing was indexed yet.
        state_dir: the state dir.
        configured: the names of the sources the config has (``None``: not known).

    Returns:
        :func:`status_of`'s answer (only ``state_dir`` and empty ``sources`` without a
        manifest) with ``daemon`` ``None``, and ``locked_by`` (the lock file's holder)
        when another process holds the state dir.
    """
    from ingestd.daemon.sync.state.clean_close import (
        read_record,
        recorded_folder_bytes,
        seed_counts,
    )
    from ingestd.daemon.wire.statelock import lock_holder

    if manifest is None:
        st: dict[str, Any] = {"state_dir": str(state_dir), "sources": []}
    else:
        seed_counts(manifest, manifest.path, state_dir)  # a clean close's: nothing counted
        folders = recorded_folder_bytes(read_record(state_dir), manifest.path)
        st = status_of(manifest, None, state_dir, configured, folders)
    st["daemon"] = None
    holder = lock_holder(state_dir)
    if holder is not None:
        st["locked_by"] = holder[1]
    return st


def _configured_origin(entry: dict[str, Any], engine: Engine) -> None:
    """Fill a fetched source's URL from its config while no fetch has recorded it."""
    from ingestd.daemon.sources.base import Fetched

    src = engine.context.source(entry["source"])
    if not isinstance(src, Fetched):
        return
    for key in ("sitemap", "url"):  # the key its kind's status part shows it under
        if key in entry and not entry[key]:
            entry[key] = src.origin()


def _source_warnings(entry: dict[str, Any], engine: Engine | None) -> list[str]:
    """Likely mistakes in a source's configuration that ``status`` shows.

    A source whose include globs match no file: the running daemon knows from its last
    scan; otherwise a source synced with no document at all is one.
    """
    name = entry["source"]
    if entry.get("configured") is False:
        return [
            f"not in the config: not watched or synced, its {entry['chunks']} chunk(s) still "
            "answer searches, marked configured: false (add it back, or `ingestd forget "
            f"{name}` deletes them)"
        ]
    if engine is not None and name in engine.context.sources:
        if name not in engine.planner.matching_nothing:
            return []
        from ingestd.daemon.sources.base import Fetched

        src = engine.context.source(name)
        if isinstance(src, Fetched):  # in its own terms, never its mirror's folder
            return [src.empty_note()]
        globs = ", ".join(engine.context.sources[name].include)
        return [f"no file under {entry['root']} matches its include globs ({globs})"]
    if entry["root_missing"] or entry["documents"] or entry["last_sync"] is None:
        return []
    return [shown_by(entry).empty_note(entry)]


def _overlap_warnings(manifest: ManifestReader, sources: list[dict[str, Any]]) -> None:
    """Warn, under both sources, about files that two recorded sources index.

    The config check refuses overlapping roots of configured sources, but a source
    recorded by an older config or by ``resync PATH`` stays in the state (and in
    search) until it is forgotten. Two roots overlap when they are the same folder, or
    when one is inside the other and the outer source holds documents below it.
    """
    indexed = [s for s in sources if s["documents"]]
    for i, a in enumerate(indexed):
        for b in indexed[i + 1 :]:
            ra, rb = PurePosixPath(a["root"]), PurePosixPath(b["root"])
            if ra in rb.parents:
                outer, inner = a, b
            elif rb in ra.parents or ra == rb:
                outer, inner = b, a
            else:
                continue
            rel = PurePosixPath(inner["root"]).relative_to(outer["root"]).as_posix()
            if rel != "." and not manifest.documents_under(outer["source"], rel):
                continue  # the outer source excludes the inner root
            shared = inner["root"] if rel == "." else f"{outer['root']}/{rel}"
            fix = (
                "search returns their chunks once per source; `ingestd forget` the source "
                "that is not configured any more"
            )
            for s, other in ((outer, inner), (inner, outer)):
                s["warnings"].append(
                    f"the files under {shared} are indexed by source {other['source']} too: " + fix
                )
