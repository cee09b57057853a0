"""Content-addressed identities: chunk hashes and point ids (DESIGN.md point 4)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable

__all__ = ["POINT_NAMESPACE", "chunk_hash", "content_hash", "point_id", "point_ids"]

#: Namespace of ingestd's UUIDv5 point ids (fixed forever: changing it re-keys every point).
POINT_NAMESPACE = uuid.UUID("6f1c4a52-9a43-5b7e-8d0e-2f3b1c9e7a10")


def content_hash(data: bytes) -> str:
    """sha256 hex of a file's raw bytes."""
    return hashlib.sha256(data).hexdigest()


def chunk_hash(embed_text: str) -> str:
    """sha256 hex of the exact text given to the model (prefix included), UTF-8."""
    return hashlib.sha256(embed_text.encode("utf-8")).hexdigest()


def point_id(source: str, path: str, chunk_hash: str, occurrence: int) -> str:
    """UUIDv5 over (source, path, chunk hash, occurrence index of that hash in the document).

    Args:
        source: the source's name.
        path: POSIX path relative to the source root.
        chunk_hash: :func:`chunk_hash` of the chunk's embedded text.
        occurrence: 0 for the first chunk with this hash in the document, 1 for the next...
    """
    return str(uuid.uuid5(POINT_NAMESPACE, f"{source}\0{path}\0{chunk_hash}\0{occurrence}"))


def point_ids(source: str, path: str, hashes: Iterable[str]) -> list[str]:
    """Point ids of a document's chunks, given their hashes in document order."""
    seen: dict[str, int] = {}
    out = []
    for h in hashes:
        k = seen.get(h, 0)
        seen[h] = k + 1
        out.append(point_id(source, path, h, k))
    return out
