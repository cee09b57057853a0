"""``read``: widen a search hit, or read lines of an indexed document.

A search hit is one chunk; to answer, a reader often needs the text around it. Given a
hit's ``id``, :func:`read` returns the hit with its neighbouring chunks (document
order), the section that encloses it (its parent section for ``hierarchical`` rules,
else the run of chunks under its heading) and the verbatim lines of the file that
cover the section, or the neighbours when the section is longer than ``max_lines``.
Given a ``path`` (and a line range), it returns those lines and the chunks that
overlap them, with their ids.

Chunks come from the store (by id: every read is a Qdrant operation), the list of a
document's chunks from the manifest, and the lines from the file as it is now
(decoded as for chunking: UTF-8, BOM removed, line ends made LF); ``stale`` says when
the file changed since it was indexed. Only indexed documents are read, so nothing
outside a source, or left out of it, is ever served.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING, Any

from ingestd.daemon.sources.versions import (
    VERSION_SEP,
    commit_of,
    document_key,
    is_versioned,
    split_document,
)
from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.daemon.sync.engine import Engine

__all__ = ["MAX_CONTEXT", "MAX_LINES", "read"]

#: Most lines one ``read`` returns.
MAX_LINES = 2000
#: Most neighbouring chunks on each side of a hit.
MAX_CONTEXT = 20
#: Chunks on each side of a hit looked at to find its section.
_SECTION_WINDOW = 64


def read(
    engine: Engine,
    id: str | None = None,
    source: str | None = None,
    path: str | None = None,
    start_line: int | None = None,
    end_line: int | None = None,
    context: int = 1,
    max_lines: int = 200,
    version: str | None = None,
) -> dict[str, Any]:
    """A hit widened to its section and neighbours, or lines of an indexed document.

    Args:
        engine: the engine (its manifest, store and sources).
        id: a chunk id from a search hit; or else ``path``.
        source: the source of ``path`` (needed when several sources hold that path).
        path: an indexed document, relative to its source's root (as in hits).
        start_line: with ``path``, the first line (1-based; default 1).
        end_line: with ``path``, the last line, inclusive (default: ``max_lines`` on).
        context: with ``id``, neighbouring chunks on each side (0 to :data:`MAX_CONTEXT`).
        max_lines: most lines returned (1 to :data:`MAX_LINES`).
        version: with ``path``, the version of a versioned source (a git branch or
            tag name, as hits' ``version`` gives it); required there.

    Returns:
        ``source``, ``path``, ``hit`` (the chunk of ``id``, else ``None``), ``chunks``
        (document order: the hit and its neighbours, or the chunks overlapping the
        lines; each with ``id``, ``ordinal``, ``start_line``, ``end_line``,
        ``heading_path`` and, for ``id``, ``text``), ``section`` (``heading_path``,
        ``start_line``, ``end_line``; ``None`` for ``path``), ``lines``
        (``start_line``, ``end_line``, ``text``, ``total_lines``, ``truncated``; ``None``
        when the file cannot be read now) and ``stale`` (the file changed since it was
        indexed: the chunks are the index's, the lines the file's); ``version``
        and ``commit`` for a document of a versioned source.

    Raises:
        DaemonError: exit code 2 for bad arguments (neither or both of ``id`` and
            ``path``, a malformed id, an unknown source); exit code 1 when the id or
            the document is not in the index.
    """
    if (id is None) == (path is None):
        raise DaemonError("give either id (a chunk id from a search hit) or path", 2)
    if not 0 <= context <= MAX_CONTEXT:
        raise DaemonError(f"context must be between 0 and {MAX_CONTEXT}", 2)
    if not 1 <= max_lines <= MAX_LINES:
        raise DaemonError(f"max_lines must be between 1 and {MAX_LINES}", 2)
    if source is not None and source not in engine.sources:
        known = ", ".join(engine.sources) or "none"
        raise DaemonError(f"unknown source: {source}; known sources: {known}", 2)
    if id is not None:
        return _read_hit(engine, id, context, max_lines)
    assert path is not None
    return _read_path(engine, path, source, start_line, end_line, max_lines, version)


def _chunk(pid: str, payload: dict[str, Any], *, text: bool = True) -> dict[str, Any]:
    out = {
        "id": pid,
        "ordinal": payload.get("ordinal"),
        "start_line": payload.get("start_line"),
        "end_line": payload.get("end_line"),
        "heading_path": list(payload.get("heading_path") or []),
    }
    if text:
        out["text"] = payload.get("text", "")
    return out


def _physical(engine: Engine, source: str) -> str | None:
    physical, _profile = engine.query_target(engine.sources[source].collection)
    return physical


def _find(engine: Engine, pid: str) -> tuple[str, dict[str, Any]]:
    """The physical collection and payload of point ``pid``."""
    try:
        pid = str(uuid.UUID(pid))
    except ValueError:
        raise DaemonError(
            f"not a chunk id: {pid!r} (ids are UUIDs, as search hits give)", 2
        ) from None
    seen: set[str] = set()
    for name in engine.sources:
        physical = _physical(engine, name)
        if physical is None or physical in seen:
            continue
        seen.add(physical)
        found = engine.store.retrieve(physical, [pid])
        if found:
            return physical, found[0][1]
    raise DaemonError(
        f"no chunk {pid} in the index (its document changed since that search?); search again"
    )


def _document_chunks(
    engine: Engine, physical: str, source: str, path: str, around: int | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``(id, payload)`` of a document's searchable chunks, by ordinal.

    ``around``: only the chunks within :data:`_SECTION_WINDOW` ordinals of it.
    """
    doc = engine.manifest.document(source, path)
    if doc is None:
        return []
    rows = [r for r in engine.manifest.chunks(doc.id) if not r.pending]
    if around is not None:
        rows = [r for r in rows if abs(r.ordinal - around) <= _SECTION_WINDOW]
    found = engine.store.retrieve(physical, [r.point_id for r in rows])
    chunks = [(pid, p) for pid, p, _ in found if not p.get("is_parent")]
    return sorted(chunks, key=lambda c: int(c[1].get("ordinal", 0)))


def _section(
    engine: Engine, physical: str, chunks: list[tuple[str, dict[str, Any]]], i: int
) -> dict[str, Any]:
    """The section enclosing ``chunks[i]``: its parent's lines, or the run under its heading."""
    hit = chunks[i][1]
    parent_id = hit.get("parent_id")
    if parent_id:
        found = engine.store.retrieve(physical, [parent_id])
        if found:
            p = found[0][1]
            return {
                "heading_path": list(p.get("heading_path") or []),
                "start_line": p["start_line"],
                "end_line": p["end_line"],
            }
    heading = list(hit.get("heading_path") or [])

    def inside(p: dict[str, Any]) -> bool:
        """Under the hit's heading; the text before the first heading is a section too."""
        path = list(p.get("heading_path") or [])
        return path[: len(heading)] == heading if heading else not path

    under = [inside(p) for _, p in chunks]
    lo = hi = i
    while lo > 0 and under[lo - 1]:
        lo -= 1
    while hi + 1 < len(chunks) and under[hi + 1]:
        hi += 1
    return {
        "heading_path": heading,
        "start_line": chunks[lo][1]["start_line"],
        "end_line": chunks[hi][1]["end_line"],
    }


def _read_hit(engine: Engine, pid: str, context: int, max_lines: int) -> dict[str, Any]:
    physical, hit = _find(engine, pid)
    source, path, key = str(hit["source"]), str(hit["path"]), document_key(hit)
    if source not in engine.sources:
        raise DaemonError(f"chunk {pid} belongs to source {source}, which is not configured")
    chunks = _document_chunks(engine, physical, source, key, around=int(hit.get("ordinal", 0)))
    ids = [c[0] for c in chunks]
    if pid not in ids:  # a parent section was asked for, or the manifest moved on
        chunks = sorted([*chunks, (pid, hit)], key=lambda c: int(c[1].get("ordinal", 0)))
        ids = [c[0] for c in chunks]
    i = ids.index(pid)
    near = chunks[max(0, i - context) : i + context + 1]
    section = _section(engine, physical, chunks, i)
    if section["end_line"] - section["start_line"] + 1 <= max_lines:
        first, last = section["start_line"], section["end_line"]
    else:  # the neighbours' span, centred on the hit
        first, last = near[0][1]["start_line"], near[-1][1]["end_line"]
        if last - first + 1 > max_lines:
            first = max(first, hit["start_line"] - (max_lines - _span(hit)) // 2)
            last = first + max_lines - 1
    text, stale = _file_text(engine, source, key, str(hit.get("doc_hash", "")))
    return {
        "source": source,
        "path": path,
        **_version_of(engine, source, key),
        "hit": _chunk(pid, hit),
        "chunks": [_chunk(c, p) for c, p in near],
        "section": section,
        "lines": _lines(text, first, last, max_lines),
        "stale": stale,
    }


def _version_of(engine: Engine, source: str, key: str) -> dict[str, Any]:
    """``version`` and ``commit`` of document ``key`` of a versioned source, else nothing."""
    src = engine.source(source)
    version, _ = split_document(src, key)
    if version is None:
        return {}
    return {"version": version, "commit": commit_of(src, version)}


def _span(payload: dict[str, Any]) -> int:
    return int(payload["end_line"]) - int(payload["start_line"]) + 1


def _read_path(
    engine: Engine,
    path: str,
    source: str | None,
    start_line: int | None,
    end_line: int | None,
    max_lines: int,
    version: str | None = None,
) -> dict[str, Any]:
    shown_path = path.strip().removeprefix("./").strip("/")
    rel = shown_path if version is None else f"{version}{VERSION_SEP}{shown_path}"
    names = [source] if source is not None else list(engine.sources)
    if version is not None:
        names = [n for n in names if is_versioned(engine.source(n))]
    holders = [n for n in names if engine.manifest.document(n, rel) is not None]
    if not holders:
        where = f"source {source}" if source is not None else "any source"
        versioned = [n for n in names if is_versioned(engine.source(n))]
        hint = (
            f"; {', '.join(versioned)} hold(s) versions: give version (a branch or tag name)"
            if versioned and version is None
            else ""
        )
        raise DaemonError(
            f"{path} is not an indexed document of {where}"
            + (f" at version {version}" if version is not None else "")
            + " (paths are relative to the source's root, as search hits give them)"
            + hint
        )
    if len(holders) > 1:
        raise DaemonError(f"{path} is in several sources ({', '.join(holders)}): give source", 2)
    (name,) = holders
    first = start_line or 1
    if first < 1 or (end_line is not None and end_line < first):
        raise DaemonError(f"bad line range {first}-{end_line}: lines are 1-based, start <= end", 2)
    physical = _physical(engine, name)
    chunks = _document_chunks(engine, physical, name, rel) if physical is not None else []
    doc = engine.manifest.document(name, rel)
    text, stale = _file_text(engine, name, rel, doc.content_hash if doc is not None else "")
    lines = _lines(text, first, end_line, max_lines)
    if lines is not None and first > max(1, lines["total_lines"]):
        raise DaemonError(
            f"start_line {first} is past the end of {shown_path} ({lines['total_lines']} lines)",
            2,
        )
    shown = (first, lines["end_line"] if lines is not None else end_line or first + max_lines - 1)
    overlap = [
        _chunk(pid, p, text=False)
        for pid, p in chunks
        if p["start_line"] <= shown[1] and p["end_line"] >= shown[0]
    ]
    return {
        "source": name,
        "path": shown_path,
        **_version_of(engine, name, rel),
        "hit": None,
        "chunks": overlap,
        "section": None,
        "lines": lines,
        "stale": stale,
    }


def _file_text(engine: Engine, source: str, rel: str, doc_hash: str) -> tuple[str | None, bool]:
    """The document's decoded text now (``None``: unreadable) and whether it changed."""
    from ingestd.chunkers.text import decode

    try:
        data = engine.source(source).read(rel)
        text = decode(data)
    except (OSError, ValueError):
        return None, True
    return text, bool(doc_hash) and hashlib.sha256(data).hexdigest() != doc_hash


def _lines(text: str | None, first: int, last: int | None, max_lines: int) -> dict[str, Any] | None:
    """Lines ``first``..``last`` of ``text`` (1-based, inclusive), at most ``max_lines``.

    ``last``: ``None`` for the end of the file. ``truncated``: lines asked for (or, to
    the end of the file, lines there are) were left out by ``max_lines``.
    """
    if text is None:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the text ends with a line end: no line after it
    total = len(lines)
    last = total if last is None else last
    stop = min(last, total, first + max_lines - 1)
    return {
        "start_line": first,
        "end_line": max(stop, first - 1),
        "text": "\n".join(lines[first - 1 : stop]),
        "total_lines": total,
        "truncated": stop < min(last, total),
    }
