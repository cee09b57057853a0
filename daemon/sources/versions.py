"""Versions of a source: a document of a versioned source is ``<version>:<path>``.

A versioned source (a git repository: :class:`~ingestd.daemon.sources.git.GitSource`)
holds several versions of its files, one per ref. The manifest keys a document by
``<version>:<path>`` (``:`` cannot occur in a git ref name, so the key splits back
without ambiguity), while the payload carries the two apart: ``path`` is the file's
path in the repository and ``version`` the ref names, so ``search --path`` and a
version filter each match one of them.

**Points shared by versions.** A point id of a versioned source is keyed on the path
*without* the version (:func:`~ingestd.daemon.sync.preparing.documents.prepare_document`), so a
chunk that several versions hold at the same path, with the same text and occurrence,
is one point, embedded once and stored once. Its payload (:func:`merge_versions`) is
the payload of its first version (by name) with ``version`` the sorted list of the
versions holding it (Qdrant matches a keyword condition on a list when any element
matches, so a version filter keeps working) and, under :data:`BY_VERSION_KEY`, what
differs in each other version's payload (offsets, lines, ordinal, ``doc_hash``,
``commit``, ...). :func:`version_view` gives back the payload of one version: what a
hit filtered to that version reports.

A source is versioned when its class says ``versioned = True``; every other source's
document key is its path as it is (a local file may have ``:`` in its name), and its
payloads hold one ``version`` at most (never a list).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from ingestd.daemon.sources.base import Versioned
from ingestd.store.search.query import PENDING_KEY

__all__ = [
    "ABSENT_KEY",
    "BY_VERSION_KEY",
    "POINT_KEYS",
    "VERSION_KEY",
    "VERSION_SEP",
    "commit_of",
    "commits_off",
    "document_key",
    "document_keys",
    "is_versioned",
    "merge_versions",
    "payload_versions",
    "split_document",
    "split_document_key",
    "strip_keys",
    "version_view",
]

#: Between the version and the path in a document key.
VERSION_SEP = ":"
#: The payload key of a point's version (of a shared point: the sorted list of versions).
VERSION_KEY = "version"
#: The payload key of a shared point's per-version differences: version -> the keys
#: whose value differs from the first version's (and :data:`ABSENT_KEY`).
BY_VERSION_KEY = "by_version"
#: In a version's differences: the keys of the first version's payload it lacks.
ABSENT_KEY = "-"
#: Payload keys of the point itself, never of one version: when it was written and
#: its write's pending marker (:data:`~ingestd.store.search.query.PENDING_KEY`).
POINT_KEYS = frozenset({"indexed_at", PENDING_KEY})


def is_versioned(source: Any) -> TypeGuard[Versioned]:
    """Whether ``source`` (a ``Source``) holds versions of its files (is :class:`Versioned`)."""
    return isinstance(source, Versioned)


def split_document(source: Any, rel: str) -> tuple[str | None, str]:
    """``(version, path)`` of document key ``rel`` of ``source``.

    For a source that is not versioned: ``(None, rel)``. For a versioned one, a key
    without a version gives ``(None, rel)``.
    """
    if not is_versioned(source):
        return None, rel
    version, sep, path = rel.partition(VERSION_SEP)
    return (version, path) if sep else (None, rel)


def split_document_key(key: str) -> tuple[str | None, str]:
    """``(version, path)`` of a manifest key known to be a versioned source's."""
    version, sep, path = key.partition(VERSION_SEP)
    return (version, path) if sep else (None, key)


def document_key(payload: Mapping[str, Any]) -> str:
    """The manifest key of the document a point's ``payload`` belongs to."""
    path = str(payload["path"])
    version = payload.get(VERSION_KEY)
    return f"{version}{VERSION_SEP}{path}" if version is not None else path


def commit_of(source: Any, version: str) -> str | None:
    """The commit ``version`` of versioned ``source`` is at (its ``commit_of``), else ``None``."""
    return source.commit_of(version) if isinstance(source, Versioned) else None


def commits_off(source: Any, version: str, commits: Iterable[str]) -> set[str]:
    """Those of ``commits`` that are not on the history of ``version`` of ``source`` now.

    A commit a document was written at names where its text is in the version (payload
    ``commit``); once the version's branch is rewritten (a force-push), the commits of
    its documents whose files did not change may be on it no more. Asks the source's
    ``commits_off``; a source without one (not versioned) has none.
    """
    return set(source.commits_off(version, commits)) if isinstance(source, Versioned) else set()


def document_keys(payload: Mapping[str, Any]) -> list[str]:
    """The manifest keys of every document holding the point of ``payload`` (one, unless shared)."""
    versions = payload_versions(payload)
    if not versions:
        return [document_key(payload)]
    path = str(payload["path"])
    return [f"{v}{VERSION_SEP}{path}" for v in versions]


def payload_versions(payload: Mapping[str, Any]) -> list[str]:
    """The versions holding a point: its ``version`` as a list (``[]`` when it has none)."""
    v = payload.get(VERSION_KEY)
    if v is None:
        return []
    return [str(x) for x in v] if isinstance(v, list) else [str(v)]


def merge_versions(views: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The payload of a point held by the versions of ``views`` (version -> its payload).

    Deterministic: the first version by name gives every key but ``version``, which
    becomes the sorted list of versions; each other version's keys that differ (and
    the keys it lacks, listed under :data:`ABSENT_KEY`) go under
    :data:`BY_VERSION_KEY` (left out when no version differs). :data:`POINT_KEYS`
    are taken from the first version only. :func:`version_view` inverts it.

    Raises:
        ValueError: ``views`` is empty.
    """
    if not views:
        raise ValueError("a point needs at least one version")
    order = sorted(views)
    base = {k: v for k, v in views[order[0]].items() if k not in (VERSION_KEY, BY_VERSION_KEY)}
    out: dict[str, Any] = dict(base)
    out[VERSION_KEY] = order
    at: dict[str, Any] = {}
    for version in order[1:]:
        p = views[version]
        diff: dict[str, Any] = {
            k: v
            for k, v in p.items()
            if k not in (VERSION_KEY, BY_VERSION_KEY)
            and k not in POINT_KEYS
            and (k not in base or base[k] != v)
        }
        gone = sorted(k for k in base if k not in p and k not in POINT_KEYS)
        if gone:
            diff[ABSENT_KEY] = gone
        if diff:
            at[version] = diff
    if at:
        out[BY_VERSION_KEY] = at
    return out


def version_view(payload: Mapping[str, Any], version: str | None = None) -> dict[str, Any]:
    """The payload of one version of a point (``version``: a string again).

    Args:
        payload: a stored payload; one without a list under ``version`` (a point of
            a source that is not versioned) is returned as it is (a copy).
        version: the version wanted; ``None`` or one not holding the point: the
            point's first version.
    """
    versions = payload.get(VERSION_KEY)
    if not isinstance(versions, list):
        return dict(payload)
    if version is None or version not in versions:
        version = str(versions[0]) if versions else None
    out = {k: v for k, v in payload.items() if k not in (VERSION_KEY, BY_VERSION_KEY)}
    diff = (payload.get(BY_VERSION_KEY) or {}).get(version) or {}
    for k in diff.get(ABSENT_KEY, ()):
        out.pop(k, None)
    out.update({k: v for k, v in diff.items() if k != ABSENT_KEY})
    out[VERSION_KEY] = version
    return out


def strip_keys(payload: Mapping[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """``payload`` without ``keys``, in each version's differences too (empty ones dropped)."""
    out = {k: v for k, v in payload.items() if k not in keys}
    at = out.get(BY_VERSION_KEY)
    if isinstance(at, dict):
        kept: dict[str, Any] = {}
        for version, diff in at.items():
            d = {k: v for k, v in diff.items() if k not in keys}
            if ABSENT_KEY in d:
                gone = [k for k in d[ABSENT_KEY] if k not in keys]
                if gone:
                    d[ABSENT_KEY] = gone
                else:
                    del d[ABSENT_KEY]
            if d:
                kept[version] = d
        if kept:
            out[BY_VERSION_KEY] = kept
        else:
            del out[BY_VERSION_KEY]
    return out
