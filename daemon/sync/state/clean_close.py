"""The clean-close record: what proves that a state dir was left whole, so that no one re-reads it.

A check that reads every point of a store costs what the index costs (a million points:
a million payloads), and it is needed only when something may be torn: a process
that ended without closing the store (a crash, ``kill -9``), a write-ahead log cut or
damaged since, a write that did not finish (pending manifest rows, found apart), a
``verify``. So the process that writes a state dir (``ingestd run``, ``resync``, a
repair) removes :data:`RECORD_FILE` before it writes anything, and writes it again last,
when it closes cleanly. It holds:

* the manifest's file as that close left it (inode, size and modification time of
  ``manifest.db`` and of its ``-wal``): the manifest has not been written since when
  they are equal (``None`` for a ``manifest.url`` database: nothing is proven of it);
* what each source held then (documents, committed and pending points, failed
  documents: :mod:`~ingestd.store.manifest.counts`), current while the manifest is
  unchanged, so that nobody counts a million rows again;
* per embedded engine, per physical collection the writer may vouch for (one it
  found proven when it started, checked point by point, or created), the points the
  store held and the engine's proof (:meth:`~ingestd.store.vectors.spec.EngineSpec.proof`:
  for Qdrant Edge, where each shard's write-ahead log ends, the CRC of its last entry,
  its segments' version and id trackers);
* the bytes each folder of the state dir took after the close (the stores, git mirrors,
  fetched sites: :func:`~ingestd.daemon.statedir.folder_bytes`), so that ``status``
  reports the state dir's size without walking a million points' files while the
  manifest is unchanged (nothing wrote since).

:func:`check_record` compares a record with the files. A collection whose proof holds
is counted from the record (``status``, and a no-op ``resync``, never open the store),
and with the manifest unchanged too, it needs no point-by-point check. One whose proof
fails was changed behind ingestd's back (a cut log, a deleted segment): ``status``
says so, and the next writer checks it point by point. A missing record proves nothing:
the last writer did not close cleanly (or was an earlier version).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.daemon.statedir import StatePaths

if TYPE_CHECKING:
    from ingestd.store.manifest.reader import ManifestReader

__all__ = [
    "RECORD_FILE",
    "CleanClose",
    "Proven",
    "Sealed",
    "check_record",
    "manifest_identity",
    "manifest_unchanged",
    "new_record",
    "read_record",
    "recorded_folder_bytes",
    "remove_record",
    "seed_counts",
    "write_record",
]

#: The record's file in the state dir.
RECORD_FILE = StatePaths.CLEAN_CLOSE
#: Version of the record's format.
FORMAT = 1


@dataclass(frozen=True)
class Sealed:
    """One physical collection as a clean close left it.

    Attributes:
        points: the points it held.
        proof: its engine's proof (JSON-ready).
    """

    points: int
    proof: Mapping[str, Any]


@dataclass
class CleanClose:
    """A clean close of a state dir (see the module docstring).

    Attributes:
        manifest: :func:`manifest_identity` of the manifest's file after the close;
            ``None`` for a ``manifest.url`` database.
        counts: source -> its counts then (:data:`~ingestd.store.manifest.counts.COUNT_KEYS`).
        folders: engine name -> the folder of its store the collections are in.
        collections: engine name -> physical collection -> :class:`Sealed`.
        folder_bytes: folder of the state dir -> the bytes it took after the close
            (:func:`~ingestd.daemon.statedir.folder_bytes`).
        closed_at: when, in seconds since the epoch.
        pid: the process that closed it.
    """

    manifest: list[int] | None
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    folders: dict[str, str] = field(default_factory=dict)
    collections: dict[str, dict[str, Sealed]] = field(default_factory=dict)
    folder_bytes: dict[str, int] = field(default_factory=dict)
    closed_at: float = 0.0
    pid: int = 0

    def as_json(self) -> dict[str, Any]:
        """The record as written."""
        return {
            "format": FORMAT,
            "closed_at": self.closed_at,
            "pid": self.pid,
            "manifest": self.manifest,
            "counts": {s: dict(c) for s, c in sorted(self.counts.items())},
            "stores": {
                engine: {
                    "folder": self.folders[engine],
                    "collections": {
                        p: {"points": s.points, "proof": dict(s.proof)}
                        for p, s in sorted(colls.items())
                    },
                }
                for engine, colls in sorted(self.collections.items())
            },
            "folder_bytes": dict(sorted(self.folder_bytes.items())),
        }


@dataclass
class Proven:
    """What a clean-close record proves now (:func:`check_record`).

    Attributes:
        manifest_unchanged: the manifest was not written since the close.
        held: ``(engine, physical)`` -> its points, for the collections whose files
            still match their proof.
        changed: ``(engine, physical)`` -> what changed, for those whose files do not.
        closed_at: when the state dir was closed (seconds since the epoch).
    """

    manifest_unchanged: bool = False
    held: dict[tuple[str, str], int] = field(default_factory=dict)
    changed: dict[tuple[str, str], str] = field(default_factory=dict)
    closed_at: float = 0.0


def manifest_identity(path: Path | None) -> list[int] | None:
    """``[inode, size, mtime_ns]`` of the manifest's file and of its ``-wal`` (0s: none).

    ``None`` for ``None`` (a ``manifest.url`` database) or a missing file.
    """
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    out = [st.st_ino, st.st_size, st.st_mtime_ns]
    try:
        wal = path.with_name(path.name + "-wal").stat()
        out += [wal.st_ino, wal.st_size, wal.st_mtime_ns]
    except OSError:
        out += [0, 0, 0]
    return out


def read_record(state_dir: Path) -> CleanClose | None:
    """The state dir's clean-close record, or ``None`` (none, or not readable as one)."""
    try:
        data = json.loads((Path(state_dir) / RECORD_FILE).read_bytes())
        if data.get("format") != FORMAT:
            return None
        rec = CleanClose(
            manifest=data["manifest"],
            closed_at=float(data.get("closed_at") or 0.0),
            pid=int(data.get("pid") or 0),
            counts={str(s): dict(c) for s, c in (data.get("counts") or {}).items()},
            folder_bytes={str(f): int(n) for f, n in (data.get("folder_bytes") or {}).items()},
        )
        for engine, store in data["stores"].items():
            rec.folders[engine] = str(store["folder"])
            rec.collections[engine] = {
                p: Sealed(int(s["points"]), dict(s["proof"]))
                for p, s in store["collections"].items()
            }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return rec


def write_record(state_dir: Path, record: CleanClose) -> None:
    """Write ``record`` atomically (temporary file, fsync, rename, fsync of the folder)."""
    state_dir = Path(state_dir)
    file = state_dir / RECORD_FILE
    tmp = file.with_name(f".{RECORD_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps(record.as_json(), indent=1).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, file)
    _sync_dir(state_dir)


def remove_record(state_dir: Path) -> bool:
    """Remove the record, durably, before anything is written; whether there was one."""
    try:
        (Path(state_dir) / RECORD_FILE).unlink()
    except FileNotFoundError:
        return False
    _sync_dir(Path(state_dir))
    return True


def _sync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_record(
    record: CleanClose | None,
    manifest: Path | None,
    folders: Mapping[str, Path],
    engines: set[str] | None = None,
) -> Proven:
    """What ``record`` proves of the files now (reads files, opens nothing).

    Args:
        record: the record (``None``: nothing is proven).
        manifest: the manifest's file, ``None`` for a ``manifest.url`` database.
        folders: each engine's store folder now; a record of another folder proves
            nothing of this one.
        engines: only these engines' collections (default: all the record names).
    """
    from ingestd.store.vectors.engines import engine_spec

    out = Proven()
    if record is None:
        return out
    out.closed_at = record.closed_at
    out.manifest_unchanged = manifest_unchanged(record, manifest)
    for engine, colls in record.collections.items():
        folder = folders.get(engine)
        if folder is None or (engines is not None and engine not in engines):
            continue
        if os.path.realpath(folder) != os.path.realpath(record.folders.get(engine, "")):
            continue
        try:
            spec = engine_spec(engine)
        except (ValueError, TypeError):
            continue
        for physical, sealed in colls.items():
            change = spec.proof_change(folder, physical, sealed.proof)
            if change is None:
                out.held[(engine, physical)] = sealed.points
            else:
                out.changed[(engine, physical)] = change
    return out


def manifest_unchanged(record: CleanClose | None, manifest: Path | None) -> bool:
    """Whether the manifest's file is as ``record``'s close left it (never for a URL one)."""
    if record is None or manifest is None or record.manifest is None:
        return False
    return record.manifest == manifest_identity(manifest)


def recorded_folder_bytes(record: CleanClose | None, manifest: Path | None) -> dict[str, int]:
    """The folders' sizes ``record``'s close measured, while the manifest is unchanged since.

    Every write to the state dir's folders (the store, a git fetch, a site's pages) is
    made by a writer, which removes the record before it writes anything: while the
    record stands and the manifest is as it left it, the sizes are current.

    Returns:
        Folder name -> bytes (:func:`~ingestd.daemon.statedir.folder_bytes`); empty when
        nothing is proven (no record, a changed or ``manifest.url`` manifest).
    """
    if not manifest_unchanged(record, manifest):
        return {}
    assert record is not None
    return dict(record.folder_bytes)


def seed_counts(manifest: ManifestReader, path: Path | None, state_dir: Path) -> bool:
    """Give ``manifest`` the counts of the last clean close, when its file is unchanged since.

    Args:
        manifest: the manifest, opened (read-only) after ``path`` was compared.
        path: its file, ``None`` for a ``manifest.url`` database.
        state_dir: the state dir holding the record.

    Returns:
        Whether counts were given.
    """
    record = read_record(state_dir)
    if record is None or not record.counts or not manifest_unchanged(record, path):
        return False
    manifest.seed_counts(record.counts)
    return True


def new_record(manifest: Path | None) -> CleanClose:
    """An empty record of a close now, by this process (the manifest's identity read now)."""
    return CleanClose(manifest_identity(manifest), closed_at=time.time(), pid=os.getpid())
