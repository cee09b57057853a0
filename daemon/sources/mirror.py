"""Where a git source keeps its mirror, and what ``status`` shows of it (no imports).

``status`` and ``sources`` must answer without the config's or git's machinery
(DESIGN.md: commands that need no embedding start within a few tenths of a second),
so what they show of a git source is read here from the mirror's
``ingestd-fetch.json``, written by :class:`~ingestd.daemon.sources.git.GitSource`
after every fetch. It holds no credential. :data:`GIT_STATUS` is the git kind's
:class:`~ingestd.daemon.sources.shown.KindStatus`: its lines in ``status`` and
``sources``.

A mirror's folder is named after its source, unique per name and the same for the
same name (:func:`mirror_dir`): the name's characters that a folder name cannot hold
become ``_``, and a digest of the exact name follows, so ``my book`` and ``my_book``
never share a mirror. A mirror named as ingestd named them before
(:func:`legacy_mirror_dir`, where those two did share one) is moved to its new folder
when its source is opened (:func:`adopt_legacy_mirror`), its objects kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.daemon.sources.shown import fetch_lines

if TYPE_CHECKING:
    from ingestd.daemon.sources.shown import When

__all__ = [
    "GIT_STATUS",
    "STATE_FILE",
    "GitStatus",
    "adopt_legacy_mirror",
    "folder_name",
    "legacy_mirror_dir",
    "mirror_dir",
    "mirror_status",
    "repo_empty_note",
]

#: The file in a mirror that records its fetches.
STATE_FILE = "ingestd-fetch.json"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


#: Most characters of a source's name kept readable in its mirror's folder name.
READABLE_CHARS = 64
#: Hex digits of the name's SHA-256 in the folder name (64 bits: no two names collide).
DIGEST_CHARS = 16


def mirror_dir(state_dir: Path, name: str) -> Path:
    """The bare mirror of git source ``name`` in ``state_dir``: ``git/<readable>-<digest>.git``.

    The folder is named by :func:`folder_name`: a folder of its own for every name, the
    same one for the same name.
    """
    return state_dir / "git" / f"{folder_name(name)}.git"


def folder_name(name: str) -> str:
    """A folder name of its own for source ``name``: ``<readable>-<digest>``.

    ``readable`` is ``name`` with every run of characters other than ``A-Za-z0-9._-``
    made ``_`` (at most :data:`READABLE_CHARS` of them, no leading dot), ``digest`` the
    first :data:`DIGEST_CHARS` hex digits of the SHA-256 of the name's UTF-8 bytes: the
    same name gives the same folder, two names never share one. Every kind that keeps a
    copy of its source in the state dir names its folder so.
    """
    readable = _SAFE.sub("_", name)[:READABLE_CHARS].lstrip(".")
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    return f"{readable}-{digest}"


def legacy_mirror_dir(state_dir: Path, name: str) -> Path:
    """Where ingestd placed the mirror of ``name`` before :func:`mirror_dir` (``git/<safe>.git``).

    Names that differ only in characters a folder name cannot hold had one folder.
    """
    return state_dir / "git" / (_SAFE.sub("_", name).strip("._") + ".git")


def adopt_legacy_mirror(state_dir: Path, name: str) -> Path:
    """The mirror folder of source ``name``, a mirror under its former name moved there.

    When :func:`mirror_dir` holds no repository and :func:`legacy_mirror_dir` does, the
    legacy folder is renamed (atomic, objects kept: nothing is fetched again). Of two
    sources that shared a legacy folder, the first one opened takes it, and its next
    fetch sets its refs to its own repository's; the other fetches anew.

    Returns:
        :func:`mirror_dir` of ``name``.
    """
    new = mirror_dir(state_dir, name)
    old = legacy_mirror_dir(state_dir, name)
    if old != new and not (new / "HEAD").exists() and (old / "HEAD").is_file():
        try:
            if new.is_dir():
                new.rmdir()  # an empty folder left by an interrupted first fetch
            os.rename(old, new)
        except OSError:  # taken by another source, or the new folder holds something
            pass
    return new


def mirror_status(root: Path) -> dict[str, Any] | None:
    """What ``status`` shows of the git source whose mirror is ``root``, else ``None``.

    Returns:
        ``url`` (the repository's, redacted; ``None`` before a fetch recorded it),
        ``refs`` (each ``version``, ``ref``, ``commit`` of the last good fetch),
        ``fetched_at`` (seconds since the epoch), ``failing_since`` (fetches fail
        since then, else ``None``) and ``fetch_error`` (redacted), from the mirror's
        ``ingestd-fetch.json``; ``None`` when ``root`` holds no such file.
    """
    try:
        st = json.loads((root / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(st, dict):
        return None
    return {
        "url": st.get("url"),
        "refs": list(st.get("refs") or []),
        "fetched_at": st.get("fetched_at"),
        "failing_since": st.get("failing_since"),
        "fetch_error": st.get("refused") or st.get("error"),
    }


def repo_empty_note(
    url: str,
    versions: Sequence[str],
    refs: Sequence[str] | None = None,
    include: Sequence[str] | None = None,
) -> str:
    """Why a repository's last good fetch left no document, naming it by its URL.

    Args:
        url: the repository's URL, without user info.
        versions: the versions fetched (none: no ref matched ``refs``).
        refs: the configured ref patterns, when known.
        include: the include globs, when known.

    Returns:
        One line, e.g. ``repository URL has no file its include globs (*.adoc) match at
        main``.
    """
    repo = f"repository {url}"
    if not versions:
        which = f"refs [{', '.join(refs)}]" if refs is not None else "its refs"
        return f"{repo} has no branch or tag that {which} selects"
    globs = f" ({', '.join(include) or 'none'})" if include is not None else ""
    return f"{repo} has no file its include globs{globs} match at {', '.join(versions)}"


class GitStatus:
    """What ``status`` and ``sources`` show of a git source: its repository, fetches, versions."""

    def recorded(self, root: Path) -> dict[str, Any] | None:
        """:func:`mirror_status` of ``root`` and ``root_missing`` (not fetched: no refs)."""
        repo = mirror_status(root)
        if repo is None:
            return None
        missing = not repo["fetched_at"] or bool(repo["fetch_error"] and not repo["refs"])
        return {**repo, "root_missing": missing}

    def shows(self, s: Mapping[str, Any]) -> bool:
        """Whether ``s`` holds a git source's versions (``refs``)."""
        return "refs" in s

    def where_lines(self, s: Mapping[str, Any]) -> Iterator[str]:
        """The repository (its root is a mirror in the state dir)."""
        yield f"  repository: {s.get('url') or '(recorded at its first fetch)'}"

    def lines(self, s: Mapping[str, Any], when: When) -> Iterator[str]:
        """Its fetches, then each version and its commit."""
        yield from fetch_lines(s, when)
        for r in s["refs"]:
            yield f"  version {r['version']} ({r['ref']}) at {str(r['commit'])[:12]}"

    def empty_note(self, s: Mapping[str, Any]) -> str:
        """No file of its versions matched the include globs (:func:`repo_empty_note`)."""
        versions = [str(r["version"]) for r in s.get("refs") or []]
        return repo_empty_note(s.get("url") or s["source"], versions) + " at the last sync"

    def where(self, row: Mapping[str, Any]) -> str:
        """The repository's URL (redacted), else the mirror's folder."""
        return str(row.get("url") or row["root"])

    def sources_lines(self, row: Mapping[str, Any], when: When) -> Iterator[str]:
        """One line per version: its ref, commit and when it was fetched."""
        for ref in row.get("refs") or []:
            yield (
                f"{row['source']}\tversion {ref['version']}\t{ref['ref']}\t{ref['commit']}"
                f"\tfetched {when(row.get('fetched_at'))}"
            )


#: The git kind's status part.
GIT_STATUS = GitStatus()
