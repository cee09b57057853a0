"""Versions of a source: a document of a versioned source is ``<version>:<path>``.

A versioned source (a git repository: :class:`~ingestd.daemon.sources.git.GitSource`)
holds several versions of its files, one per ref. The manifest and the point ids key a
document by ``<version>:<path>`` (``:`` cannot occur in a git ref name, so the key
splits back without ambiguity), while the payload carries the two apart: ``path`` is
the file's path in the repository and ``version`` the ref name, so ``search --path``
and a version filter each match one of them.

A source is versioned when its class says ``versioned = True``; every other source's
document key is its path as it is (a local file may have ``:`` in its name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "VERSION_KEY",
    "VERSION_SEP",
    "commit_of",
    "document_key",
    "is_versioned",
    "split_document",
]

#: Between the version and the path in a document key.
VERSION_SEP = ":"
#: The payload key of a point's version.
VERSION_KEY = "version"


def is_versioned(source: Any) -> bool:
    """Whether ``source`` (a ``Source``) holds versions of its files."""
    return bool(getattr(source, "versioned", False))


def split_document(source: Any, rel: str) -> tuple[str | None, str]:
    """``(version, path)`` of document key ``rel`` of ``source``.

    For a source that is not versioned: ``(None, rel)``. For a versioned one, a key
    without a version gives ``(None, rel)``.
    """
    if not is_versioned(source):
        return None, rel
    version, sep, path = rel.partition(VERSION_SEP)
    return (version, path) if sep else (None, rel)


def document_key(payload: Mapping[str, Any]) -> str:
    """The manifest key of the document a point's ``payload`` belongs to."""
    path = str(payload["path"])
    version = payload.get(VERSION_KEY)
    return f"{version}{VERSION_SEP}{path}" if version is not None else path


def commit_of(source: Any, version: str) -> str | None:
    """The commit ``version`` of versioned ``source`` is at (its ``commit_of``), else ``None``."""
    fn = getattr(source, "commit_of", None)
    return fn(version) if callable(fn) else None
