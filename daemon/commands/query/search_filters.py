"""A search's filters checked against the sources, and the notes when one matches nothing.

A ``path`` filter is relative to a source's root (an absolute path under a root is
turned into one); one that leaves every root (``../..``, ``/etc``) is an error that
names it, never "no results"; so is a version that no source holds while every
versioned source has been fetched (the error lists the versions), and for the CLI a
version of sources that have none (folders, sites). A filter that matches no indexed
document (a path; a version while a source has no versions yet) gets a note saying so
beside the empty answer. The messages name the filters, not the flags of one
front end: the CLI's ``--version`` is the MCP tool's and the API's ``version``.

A source's versions are its reader's when the config names its kind, else those the
state dir records of it (:func:`versions_of`): without a config a git source is read
from its mirror as a folder, and its fetch record (what ``ingestd sources`` lists)
still says which versions it holds.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ingestd.daemon.sources.shown import recorded_versions
from ingestd.daemon.sources.versions import VERSION_SEP, is_versioned
from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine

__all__ = ["check_path", "check_version", "filter_notes", "versions_of"]


def check_path(engine: Engine, names: list[str], path: str | None) -> tuple[str | None, str | None]:
    """A ``path`` filter as the store matches it, and the source it names, if absolute.

    A relative path is relative to each source's root (as hits give paths); an
    absolute one must lie under a selected source's root and is turned into a path
    relative to it (that source is then the only one searched).

    Args:
        engine: the engine (its sources and their roots).
        names: the selected sources.
        path: the filter as given (``None``: no filter).

    Returns:
        ``(relative path or None, source or None)``.

    Raises:
        DaemonError: exit code 2: an absolute path under no selected source's root, or
            a relative path that leaves the root (``..``), naming the path.
    """
    if path is None:
        return None, None
    raw = path.strip()
    if os.path.isabs(raw):
        real = Path(os.path.realpath(raw))
        for name in names:
            root = Path(os.path.realpath(engine.context.sources[name].root))
            if real.is_relative_to(root):
                rel = real.relative_to(root).as_posix()
                return ("" if rel == "." else rel), name
        roots = ", ".join(str(engine.context.sources[n].root) for n in names) or "none"
        raise DaemonError(
            f"path filter {path} is outside every source's root (roots: {roots}); paths are "
            "relative to a source's root, as hits give them",
            2,
        )
    if ".." in PurePosixPath(raw.replace("\\", "/")).parts:
        raise DaemonError(
            f"path filter {path} leaves the source's root (..): paths are relative to a "
            "source's root, as hits give them",
            2,
        )
    return path, None


def check_version(
    engine: Engine, names: list[str], version: str | None, *, strict: bool = False
) -> None:
    """Refuse a ``version`` filter that none of the selected sources can hold.

    Args:
        engine: the engine (its sources).
        names: the selected sources.
        version: the filter (``None``: none).
        strict: sources without versions count as known too (see ``strict_version`` of
            :class:`~ingestd.store.search.request.SearchRequest`).

    Raises:
        DaemonError: exit code 2, as an unknown source is: every versioned source
            selected has fetched its versions and none is ``version`` (the message
            lists them); with ``strict``, also when no selected source has versions
            (folders, sites). A source not fetched yet may still hold it: then the
            search runs, and an empty answer gets a note.
    """
    if version is None:
        return
    versioned = {n: vs for n in names if (vs := versions_of(engine, n)) is not None}
    if any(version in vs for vs in versioned.values()):
        return
    if versioned and all(versioned.values()):
        known = "; ".join(f"{n}: {', '.join(sorted(vs))}" for n, vs in versioned.items())
        raise DaemonError(f"unknown version {version}; known versions: {known}", 2)
    if strict and not versioned:
        raise DaemonError(
            f"unknown version {version}: no source searched has versions "
            f"({', '.join(names) or 'none'}); a version is a branch or tag of a git source",
            2,
        )


def filter_notes(
    engine: Engine, names: list[str], path: str | None, version: str | None
) -> list[str]:
    """Why a filtered search found nothing, when its filter matches no indexed document.

    An unknown ``version`` (no selected source holds it) or a ``path`` under which no
    document of the selected sources is indexed makes "no results" a typo to fix, not
    an answer; a filter that matches documents says nothing (the query found nothing).
    Reads the manifest (a prefix query per source and version).
    """
    notes: list[str] = []
    versioned: dict[str, set[str]] = {}
    for n in names:
        held = versions_of(engine, n)
        if held is not None:
            versioned[n] = held
    if version is not None:
        holders = [n for n, vs in versioned.items() if version in vs]
        if not holders:
            known = "; ".join(
                f"{n}: {', '.join(sorted(vs)) or 'none yet'}" for n, vs in versioned.items()
            )
            notes.append(
                f"nothing matches version {version}: "
                + (
                    f"no source holds it (versions of {known})"
                    if known
                    else "no source has versions"
                )
            )
            return notes
    if path:
        prefixes = []
        for n in names:
            if n in versioned:
                vs = [version] if version is not None else sorted(versioned[n])
                prefixes += [(n, f"{v}{VERSION_SEP}{path}") for v in vs]
            elif version is None:
                prefixes.append((n, path))
        if not any(engine.resources.manifest.documents(n, p) for n, p in prefixes):
            notes.append(
                f"nothing matches path {path}: no document of {', '.join(names)} is indexed "
                "there (a path is relative to the source's root, as `ingestd sources` shows it)"
            )
    return notes


def versions_of(engine: Engine, name: str) -> set[str] | None:
    """The versions source ``name`` holds now, else ``None`` (its kind has none).

    A versioned reader's (the config named a git source), else the versions the state
    dir records of the source at its root
    (:func:`~ingestd.daemon.sources.shown.recorded_versions`: a git mirror read as a
    folder); an empty set: a versioned source not fetched yet.
    """
    src = engine.context.source(name)
    if is_versioned(src):
        return set(src.versions())
    root = getattr(src, "root", None)
    return recorded_versions(Path(root)) if root is not None else None
