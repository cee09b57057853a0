"""The files page: one folder of a source, what is indexed there and what is not, and why.

A folder's entries come from two places. The manifest gives the documents: indexed
(with their chunks) or failed (with the error, which says how to change it: a
secret-bearing name names ``files.allow_secret_names``...). For a local folder source,
the folder on disk gives the files the manifest lacks: each one's reason is the
scan's (a name that is not valid UTF-8, an unreadable folder), else the source's
filter's (:meth:`~ingestd.daemon.sources.filter.SourceFilter.excluded_by`: the
built-in ignores, the ``include`` or ``exclude`` glob, the ``.gitignore`` line), else
it waits for the next sync. A versioned (git) source is listed from the manifest
alone, its versions as the top folders.

Nothing outside a source's root is read: :func:`inside_root` refuses ``..``, absolute
paths and symbolic links that lead out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.daemon.sources.versions import VERSION_SEP

if TYPE_CHECKING:
    from ingestd.daemon.sources.filter import SourceFilter

__all__ = ["MAX_ROWS", "Entry", "folder_entries", "inside_root", "manifest_prefix"]

#: Most manifest rows one folder page reads.
MAX_ROWS = 20_000


@dataclass
class Entry:
    """One file or folder of a listing.

    Attributes:
        name: its name in the folder (a folder's ends with ``/``).
        path: its path in the listing (relative to the root; for a versioned source
            the version is the first folder).
        folder: a folder (the link browses it).
        state: ``indexed``, ``failed``, ``left out`` or ``waiting`` (a folder:
            ``""``, or ``left out``).
        reason: why it is not indexed, and how to change that.
        chunks: the chunks it holds (a folder: its documents' chunks).
        documents: a folder's indexed documents.
        size: bytes (files).
        indexed_at: when it was written, seconds since the epoch.
    """

    name: str
    path: str
    folder: bool
    state: str = ""
    reason: str = ""
    chunks: int = 0
    documents: int = 0
    size: int | None = None
    indexed_at: float | None = None


def inside_root(root: Path, rel: str) -> Path | None:
    """``root/rel`` when it is inside ``root`` after symbolic links are followed, else ``None``."""
    if rel.startswith("/") or ".." in rel.split("/") or "\0" in rel:
        return None
    real_root = Path(os.path.realpath(root))
    target = Path(os.path.realpath(real_root / rel))
    return target if target == real_root or target.is_relative_to(real_root) else None


def manifest_prefix(folder: str, versioned: bool) -> str:
    """The manifest path prefix of listing folder ``folder`` (``v2/docs`` -> ``v2:docs/``)."""
    folder = folder.strip("/")
    if not folder:
        return ""
    if not versioned:
        return folder + "/"
    version, _, rest = folder.partition("/")
    return f"{version}{VERSION_SEP}{rest}/" if rest else f"{version}{VERSION_SEP}"


def _listing_path(key: str, versioned: bool) -> str:
    """A manifest key as a listing path (``v2:docs/a.md`` -> ``v2/docs/a.md``)."""
    if not versioned:
        return key
    version, sep, path = key.partition(VERSION_SEP)
    return f"{version}/{path}" if sep else key


def folder_entries(
    folder: str,
    documents: list[dict[str, Any]],
    *,
    versioned: bool = False,
    root: Path | None = None,
    flt: SourceFilter | None = None,
    skipped: dict[str, str] | None = None,
) -> list[Entry]:
    """The entries of ``folder``: subfolders first, then files, each by name.

    Args:
        folder: the folder, relative to the root (``""``: the root).
        documents: the manifest's documents under it
            (:meth:`~ingestd.store.manifest.view.ManifestView.documents_in`).
        versioned: the source is versioned (its manifest keys are ``VERSION:path``).
        root: a local folder source's root: its files the manifest lacks are listed.
        flt: that source's filter (the reason a file is left out).
        skipped: what scans left out, path -> reason (``status``'s ``skipped``).
    """
    folder = folder.strip("/")
    base = folder + "/" if folder else ""
    files: dict[str, Entry] = {}
    folders: dict[str, Entry] = {}
    for d in documents:
        rel = _listing_path(str(d["path"]), versioned)
        if not rel.startswith(base):
            continue
        name, sep, _rest = rel[len(base) :].partition("/")
        if sep:
            sub = folders.setdefault(name, Entry(name + "/", base + name, True))
            sub.chunks += int(d["chunks"])
            sub.documents += d["state"] == "ok"
            continue
        ok = d["state"] == "ok"
        files[name] = Entry(
            name,
            rel,
            False,
            "indexed" if ok else "failed",
            "" if ok else str(d.get("error") or ""),
            int(d["chunks"]),
            size=d.get("size"),
            indexed_at=d.get("indexed_at"),
        )
    if root is not None:
        _add_from_disk(root, folder, files, folders, flt, skipped or {})
    return [folders[k] for k in sorted(folders)] + [files[k] for k in sorted(files)]


def _add_from_disk(
    root: Path,
    folder: str,
    files: dict[str, Entry],
    folders: dict[str, Entry],
    flt: SourceFilter | None,
    skipped: dict[str, str],
) -> None:
    """Add the files and folders on disk in ``folder`` that the manifest does not list."""
    where = inside_root(root, folder)
    if where is None or not where.is_dir():
        return
    base = folder + "/" if folder else ""
    try:
        entries = sorted(os.scandir(where), key=lambda e: e.name)
    except OSError:
        return
    for e in entries:
        rel = base + e.name
        try:
            is_dir = e.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if e.name not in folders:
                why = skipped.get(rel + "/") or (flt.folder_excluded_by(rel) if flt else None)
                state = "left out" if why else ""
                folders[e.name] = Entry(e.name + "/", rel, True, state, why or "")
            continue
        if e.name in files:
            continue
        why = skipped.get(rel) or (flt.excluded_by(rel) if flt else None)
        if why:
            files[e.name] = Entry(e.name, rel, False, "left out", why)
        else:
            files[e.name] = Entry(
                e.name, rel, False, "waiting", "not indexed yet: the next sync adds it"
            )
