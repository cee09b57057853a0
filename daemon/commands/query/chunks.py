"""``chunks``: a document's chunks as the index holds them (``ingestd ui``'s chunk view).

:func:`document_chunks` reads a document's searchable chunks from the store, by the
point ids the manifest records for it (every read a Qdrant retrieve by id), in
document order; ``read`` widens hits with it. :func:`chunks` is the control command:
the payload of each chunk (rule, chunker, tokens, lines, heading path, the format's
own citation, version and commit), the fields ``ingestd chunk`` previews for a file
before it is indexed. Only indexed documents are answered, so nothing outside a
source, or left out of it, is ever read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ingestd.daemon.sources.versions import (
    VERSION_KEY,
    VERSION_SEP,
    document_key,
    is_versioned,
    split_document_key,
    version_view,
)
from ingestd.daemon.wire.errors import DaemonError
from ingestd.store.search.citation import cite

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine
    from ingestd.store.search.passages import Passage

__all__ = [
    "CHUNK_KEYS",
    "MAX_CHUNKS",
    "chunks",
    "chunks_between",
    "document_chunks",
    "physical_of",
]

#: Most chunks one ``chunks`` call returns (``files.max_chunks``' default is 20,000).
MAX_CHUNKS = 5_000

#: The payload keys of each chunk :func:`chunks` returns (with its citation keys).
CHUNK_KEYS = (
    "ordinal",
    "start_line",
    "end_line",
    "start_char",
    "end_char",
    "n_tokens",
    "heading_path",
    "rule",
    "chunker",
    "parent_id",
    "text",
)

#: Chunks on each side of ``around`` that :func:`document_chunks` reads.
SECTION_WINDOW = 64


def physical_of(engine: Engine, source: str) -> str | None:
    """The physical collection searches of ``source`` read now (``None``: none yet)."""
    physical, _profile = engine.collections.query_target(engine.context.sources[source].collection)
    return physical


def document_chunks(
    engine: Engine,
    physical: str,
    source: str,
    path: str,
    around: int | None = None,
    ordinals: tuple[int, int] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """``(id, payload)`` of a document's searchable chunks, by ordinal.

    Args:
        engine: the engine (its manifest and store).
        physical: the physical collection to read.
        source: the source name.
        path: the document's manifest key (``VERSION<sep>path`` for a versioned source).
        around: only the chunks within 64 ordinals of this one.
        ordinals: only the chunks of ordinals in ``[first, last]``.
    """
    doc = engine.resources.manifest.document(source, path)
    if doc is None:
        return []
    rows = [r for r in engine.resources.manifest.chunks(doc.id) if not r.pending]
    if around is not None:
        rows = [r for r in rows if abs(r.ordinal - around) <= SECTION_WINDOW]
    if ordinals is not None:
        rows = [r for r in rows if ordinals[0] <= r.ordinal <= ordinals[1]]
    if not rows:
        return []
    found = engine.resources.store.retrieve(physical, [r.point_id for r in rows])
    version = split_document_key(path)[0] if is_versioned(engine.context.source(source)) else None
    views = [(pid, version_view(p, version)) for pid, p, _ in found]
    out = [(pid, p) for pid, p in views if not p.get("is_parent")]
    return sorted(out, key=lambda c: int(c[1].get("ordinal", 0)))


def chunks_between(
    engine: Engine, homes: Mapping[str, str | None], a: Passage, b: Passage
) -> list[dict[str, Any]]:
    """The chunks of ``a``'s document between its passages ``a`` and ``b`` (``b`` later).

    The ``between`` of :func:`ingestd.store.search.passages.fill`: the document's
    manifest rows of the ordinals between, their points read by id (as
    :func:`document_chunks`) from the collection ``a``'s hits came from.

    Args:
        engine: the engine (its manifest and store).
        homes: each hit's physical collection, by chunk id.
        a: the earlier passage.
        b: the later passage of the same document.

    Returns:
        Payloads with ``id``, by ordinal; ``[]`` when the index holds none of them.
    """
    physical = next((homes[i] for i in a.ids if homes.get(i)), None)
    first, last = a.ordinals[1] + 1, b.ordinals[0] - 1
    if physical is None or a.ordinals[1] < 0 or last < first:
        return []
    key = document_key({"path": a.path, VERSION_KEY: a.cite.get(VERSION_KEY)})
    found = document_chunks(engine, physical, a.source, key, ordinals=(first, last))
    return [{**payload, "id": pid} for pid, payload in found]


def chunks(engine: Engine, source: str, path: str, version: str | None = None) -> dict[str, Any]:
    """The chunks of indexed document ``path`` of ``source``, as the store holds them.

    Args:
        engine: the engine.
        source: the source name.
        path: the document, relative to the source's root (as hits give it).
        version: the version of a versioned source (a branch or tag name).

    Returns:
        ``source``, ``path``, ``version`` (or ``None``), ``state`` and ``error`` (the
        manifest's), ``indexed_at`` (seconds since the epoch), ``total`` and
        ``chunks`` (at most :data:`MAX_CHUNKS`, document order): each ``id`` and the
        :data:`CHUNK_KEYS` of its payload, with its citation keys.

    Raises:
        DaemonError: exit code 2 for an unknown source, exit code 1 when the document
            is not in the index.
    """
    if source not in engine.context.sources:
        known = ", ".join(engine.context.sources) or "none"
        raise DaemonError(f"unknown source: {source}; known sources: {known}", 2)
    rel = path.strip().removeprefix("./").strip("/")
    key = rel if version is None else f"{version}{VERSION_SEP}{rel}"
    doc = engine.resources.manifest.document(source, key)
    if doc is None:
        raise DaemonError(f"{rel} is not a document of source {source} in the index")
    physical = physical_of(engine, source)
    found = document_chunks(engine, physical, source, key) if physical is not None else []
    out = []
    for pid, payload in found[:MAX_CHUNKS]:
        chunk = {"id": pid, **{k: payload[k] for k in CHUNK_KEYS if k in payload}}
        chunk.update(cite(payload))
        out.append(chunk)
    return {
        "source": source,
        "path": rel,
        "version": version,
        "state": doc.state,
        "error": doc.error,
        "indexed_at": doc.indexed_at,
        "total": len(found),
        "chunks": out,
    }
