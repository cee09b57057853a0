"""``read``: widen a search hit, or read lines of an indexed document.

A search hit is one chunk; to answer, a reader often needs the text around it. Given a
hit's ``id``, :func:`read` returns the hit with its neighbouring chunks (document
order), the section that encloses it (its parent section for ``hierarchical`` rules,
else the run of chunks under its heading) and the verbatim lines of the file that
cover the section, or the neighbours when the section is longer than ``max_lines``.
Given a ``path`` (and a line range), it returns those lines and the chunks that
overlap them, with their ids.

Chunks come from the store (by id: every read is a Qdrant operation), the list of a
document's chunks from the manifest, and the lines from the file as it is now, read
by its rule's reader as for chunking (text files decoded: UTF-8, BOM removed, line
ends made LF; a notebook, HTML page or PDF as the text extracted from it, never its
raw bytes), so that lines are those the chunks' ``start_line``/``end_line`` count;
the lines, and each chunk, also carry the format's own citation (``page``, ``cell``,
the HTML file's lines), each chunk its version and commit too, and the answer those of
the document (see :mod:`~ingestd.store.search.citation`).
``stale`` says when the file changed since it was indexed. Only indexed documents are
read, so nothing outside a source, or left out of it, is ever served.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ingestd.chunkers.readers.document import citation
from ingestd.daemon.commands.query.chunks import document_chunks, physical_of
from ingestd.daemon.commands.query.extracted import extracted_cache
from ingestd.daemon.commands.query.search_filters import versions_of
from ingestd.daemon.sources.versions import (
    VERSION_SEP,
    commit_of,
    document_key,
    split_document,
    version_view,
)
from ingestd.daemon.wire.errors import DaemonError
from ingestd.store.search.citation import cite, version_text

if TYPE_CHECKING:
    from ingestd.chunkers.readers.document import Extracted
    from ingestd.daemon.engine import Engine

__all__ = ["MAX_BUDGET", "MAX_CONTEXT", "MAX_LINES", "read", "read_text"]

#: Largest token budget of one ``read``.
MAX_BUDGET = 32_768

#: Most lines one ``read`` returns.
MAX_LINES = 2000
#: Most neighbouring chunks on each side of a hit.
MAX_CONTEXT = 20


def read(
    engine: Engine,
    id: str | None = None,
    source: str | None = None,
    path: str | None = None,
    start_line: int | None = None,
    end_line: int | None = None,
    context: int = 1,
    max_lines: int = 200,
    budget_tokens: int | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """A hit widened to its section and neighbours, or lines of an indexed document.

    With ``budget_tokens``, the lines returned fit that many tokens (the index's budget
    tokenizer, cl100k_base by default): a hit is widened to its section first, then
    past it, a chunk at a time on each side, as far as the budget allows
    (:mod:`~ingestd.daemon.commands.query.widen`); the chunks listed carry no text (the lines
    hold it).

    Args:
        engine: the engine (its manifest, store and sources).
        id: a chunk id from a search hit; or else ``path``.
        source: the source of ``path`` (needed when several sources hold that path).
        path: an indexed document, relative to its source's root (as in hits).
        start_line: with ``path``, the first line (1-based; default 1).
        end_line: with ``path``, the last line, inclusive (default: ``max_lines`` on).
        context: with ``id``, neighbouring chunks on each side (0 to :data:`MAX_CONTEXT`).
        max_lines: most lines returned (1 to :data:`MAX_LINES`).
        budget_tokens: most tokens of the lines returned (1 to :data:`MAX_BUDGET`);
            ``None``: ``max_lines`` alone bounds them.
        version: with ``path``, the version of a versioned source (a git branch or
            tag name, as hits' ``version`` gives it); required there. With ``id``, the
            version to read a chunk that several versions share in (its first
            version's when not given or not holding it).

    Returns:
        ``source``, ``path``, ``hit`` (the chunk of ``id``, else ``None``), ``chunks``
        (document order: the hit and its neighbours, or the chunks overlapping the
        lines; each with ``id``, ``ordinal``, ``start_line``, ``end_line``,
        ``heading_path``, its citation keys (:func:`~ingestd.store.search.citation.cite`)
        and, for ``id``, ``text``), ``section`` (``heading_path``,
        ``start_line``, ``end_line``; ``None`` for ``path``), ``lines``
        (``start_line``, ``end_line``, ``text``, ``total_lines``, ``truncated``; ``None``
        when the file cannot be read now), ``stale`` (the file changed since it was
        indexed: the chunks are the index's, the lines the file's), ``version`` and
        ``commit`` for a document of a versioned source, and, with a budget,
        ``budget_tokens`` and ``tokens`` (of the lines' text).

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
    if budget_tokens is not None and not 1 <= budget_tokens <= MAX_BUDGET:
        raise DaemonError(f"budget_tokens must be between 1 and {MAX_BUDGET}", 2)
    if source is not None and source not in engine.context.sources:
        known = ", ".join(engine.context.sources) or "none"
        raise DaemonError(f"unknown source: {source}; known sources: {known}", 2)
    if id is not None:
        out = _read_hit(engine, id, context, max_lines, budget_tokens, version)
    else:
        assert path is not None
        out = _read_path(
            engine, path, source, start_line, end_line, max_lines, budget_tokens, version
        )
    if budget_tokens is not None:
        text = out["lines"]["text"] if out["lines"] is not None else ""
        out["budget_tokens"] = budget_tokens
        out["tokens"] = engine.profiles.profile.rules.context.sizer.count(text)
    return out


def read_text(
    got: Mapping[str, Any],
    *,
    more: str = "a larger budget or more lines",
    sync: str = "sync it",
) -> str:
    """:func:`read`'s answer as text: where it is, the file's lines, then the chunks' ids.

    The head names the file, its source, its version and commit (a versioned source)
    and the section; the lines come with the format's citation of them (``pp. 10-11``).

    Args:
        got: what :func:`read` returned (its JSON).
        more: what to ask for when the lines were cut, in the caller's words.
        sync: what to do when the file changed since it was indexed, in its words.
    """
    head = f"{got['path']} (source {got['source']}"
    head += f", version {version_text(got)})" if got.get("version") else ")"
    section = got.get("section")
    if section is not None:
        heading = " > ".join(section["heading_path"]) or "(top of the file)"
        head += f", section {heading}, lines {section['start_line']}-{section['end_line']}"
    if got.get("stale"):
        head += f"; the file changed since it was indexed: {sync}"
    lines = got.get("lines")
    if lines is None:
        body = "(the file cannot be read now)\n"
        body += "\n\n".join(c.get("text") or "" for c in got["chunks"])
    else:
        body = f"lines {lines['start_line']}-{lines['end_line']} of {lines['total_lines']}"
        if words := citation(lines):
            body += f" ({words})"
        if got.get("tokens") is not None:
            body += f", {got['tokens']} of {got['budget_tokens']} tokens"
        if lines["truncated"]:
            body += f" (cut: ask for {more})"
        body += ":\n" + lines["text"]
    ids = ", ".join(f"{c['id']} (lines {c['start_line']}-{c['end_line']})" for c in got["chunks"])
    return f"{head}\n{body}\n\nchunks: {ids or 'none'}"


def _chunk(pid: str, payload: dict[str, Any], *, text: bool = True) -> dict[str, Any]:
    out = {
        "id": pid,
        "ordinal": payload.get("ordinal"),
        "start_line": payload.get("start_line"),
        "end_line": payload.get("end_line"),
        "heading_path": list(payload.get("heading_path") or []),
    }
    out.update(cite(payload))
    if text:
        out["text"] = payload.get("text", "")
    return out


def _find(engine: Engine, pid: str, version: str | None = None) -> tuple[str, dict[str, Any]]:
    """The physical collection and payload of point ``pid`` (in ``version``, if shared)."""
    try:
        pid = str(uuid.UUID(pid))
    except ValueError:
        raise DaemonError(
            f"not a chunk id: {pid!r} (ids are UUIDs, as search hits give)", 2
        ) from None
    seen: set[str] = set()
    for name in engine.context.sources:
        physical = physical_of(engine, name)
        if physical is None or physical in seen:
            continue
        seen.add(physical)
        found = engine.resources.store.retrieve(physical, [pid])
        if found:
            return physical, version_view(found[0][1], version)
    raise DaemonError(
        f"no chunk {pid} in the index (its document changed since that search?); search again"
    )


def _section(
    engine: Engine, physical: str, chunks: list[tuple[str, dict[str, Any]]], i: int
) -> tuple[dict[str, Any], tuple[int, int]]:
    """The section enclosing ``chunks[i]``: its parent's lines, or the run under its heading.

    Returns:
        The section, and the first and last index of its chunks in ``chunks``.
    """
    hit = chunks[i][1]
    parent_id = hit.get("parent_id")
    if parent_id:
        found = engine.resources.store.retrieve(physical, [parent_id])
        if found:
            p = version_view(found[0][1], hit.get("version"))
            members = [
                k
                for k, (_, c) in enumerate(chunks)
                if c["start_line"] >= p["start_line"] and c["end_line"] <= p["end_line"]
            ]
            return {
                "heading_path": list(p.get("heading_path") or []),
                "start_line": p["start_line"],
                "end_line": p["end_line"],
            }, (min(members, default=i), max(members, default=i))
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
    }, (lo, hi)


def _read_hit(
    engine: Engine,
    pid: str,
    context: int,
    max_lines: int,
    budget: int | None,
    version: str | None = None,
) -> dict[str, Any]:
    physical, hit = _find(engine, pid, version)
    source, path, key = str(hit["source"]), str(hit["path"]), document_key(hit)
    if source not in engine.context.sources:
        raise DaemonError(f"chunk {pid} belongs to source {source}, which is not configured")
    chunks = document_chunks(engine, physical, source, key, around=int(hit.get("ordinal", 0)))
    ids = [c[0] for c in chunks]
    if pid not in ids:  # a parent section was asked for, or the manifest moved on
        chunks = sorted([*chunks, (pid, hit)], key=lambda c: int(c[1].get("ordinal", 0)))
        ids = [c[0] for c in chunks]
    i = ids.index(pid)
    near = chunks[max(0, i - context) : i + context + 1]
    section, inside = _section(engine, physical, chunks, i)
    if section["end_line"] - section["start_line"] + 1 <= max_lines:
        first, last = section["start_line"], section["end_line"]
    else:  # the neighbours' span, centred on the hit
        first, last = near[0][1]["start_line"], near[-1][1]["end_line"]
        if last - first + 1 > max_lines:
            first = max(first, hit["start_line"] - (max_lines - _span(hit)) // 2)
            last = first + max_lines - 1
    doc, stale = _file_text(engine, source, key, str(hit.get("doc_hash", "")))
    if budget is not None:
        from ingestd.daemon.commands.query.widen import widen

        count = engine.profiles.profile.rules.context.sizer.count
        if doc is not None:
            first, last = widen(chunks, i, inside, _split(doc.text), budget, count)
        near = [c for c in chunks if c[1]["start_line"] <= last and c[1]["end_line"] >= first]
        if not near:
            near = [chunks[i]]
    return {
        "source": source,
        "path": path,
        **_version_of(engine, source, key),
        "hit": _chunk(pid, hit, text=budget is None),
        "chunks": [_chunk(c, p, text=budget is None) for c, p in near],
        "section": section,
        "lines": _lines(doc, first, last, max_lines if budget is None else MAX_LINES),
        "stale": stale,
    }


def _version_of(engine: Engine, source: str, key: str) -> dict[str, Any]:
    """``version`` and ``commit`` of document ``key`` of a versioned source, else nothing."""
    src = engine.context.source(source)
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
    budget: int | None,
    version: str | None = None,
) -> dict[str, Any]:
    shown_path = path.strip().removeprefix("./").strip("/")
    rel = shown_path if version is None else f"{version}{VERSION_SEP}{shown_path}"
    names = [source] if source is not None else list(engine.context.sources)
    if version is not None:
        names = [n for n in names if versions_of(engine, n) is not None]
    holders = [n for n in names if engine.resources.manifest.document(n, rel) is not None]
    if not holders:
        where = f"source {source}" if source is not None else "any source"
        versioned = [n for n in names if versions_of(engine, n) is not None]
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
    physical = physical_of(engine, name)
    chunks = document_chunks(engine, physical, name, rel) if physical is not None else []
    doc = engine.resources.manifest.document(name, rel)
    extracted, stale = _file_text(engine, name, rel, doc.content_hash if doc else "")
    lines = _lines(extracted, first, end_line, max_lines)
    if lines is not None and budget is not None and extracted is not None:
        from ingestd.daemon.commands.query.widen import lines_within

        last = lines_within(
            _split(extracted.text),
            first,
            lines["end_line"],
            budget,
            engine.profiles.profile.rules.context.sizer.count,
        )
        if last < lines["end_line"]:
            lines = _lines(extracted, first, last, max_lines)
            assert lines is not None
            lines["truncated"] = True
    if lines is not None and first > max(1, lines["total_lines"]):
        raise DaemonError(
            f"start_line {first} is past the end of {shown_path} ({lines['total_lines']} lines)",
            2,
        )
    shown = (first, lines["end_line"] if lines is not None else end_line or first + max_lines - 1)
    overlap = [
        _chunk(pid, p, text=lines is None)  # the file unreadable: the indexed text stands in
        for pid, p in chunks
        if p["start_line"] <= shown[1] and p["end_line"] >= shown[0]
    ]
    return {
        "source": name,
        "path": shown_path,
        # a git mirror read from the state dir alone is a folder: the version asked is the one
        **(_version_of(engine, name, rel) or ({"version": version} if version else {})),
        "hit": None,
        "chunks": overlap,
        "section": None,
        "lines": lines,
        "stale": stale,
    }


def _file_text(
    engine: Engine, source: str, rel: str, doc_hash: str
) -> tuple[Extracted | None, bool]:
    """The document now, read by its rule's reader (``None``: unreadable), and if it changed.

    The extracted text is kept while the bytes are the same
    (:data:`~ingestd.daemon.commands.query.extracted.extracted_cache`): a PDF is not read
    through again per call.
    """
    try:
        data = engine.context.source(source).read(rel)
        rule = engine.context.rule_of(source, rel)
        digest = hashlib.sha256(data).hexdigest()
        doc = extracted_cache.get((rule.fingerprint, digest), lambda: rule.reader.read(data))
    except (OSError, ValueError):
        return None, True
    return doc, bool(doc_hash) and digest != doc_hash


def _split(text: str) -> list[str]:
    """The lines of ``text`` (a last line end opens no line after it)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _lines(
    doc: Extracted | None, first: int, last: int | None, max_lines: int
) -> dict[str, Any] | None:
    """Lines ``first``..``last`` of ``doc``'s text (1-based, inclusive), at most ``max_lines``.

    ``last``: ``None`` for the end of the file. ``truncated``: lines asked for (or, to
    the end of the file, lines there are) were left out by ``max_lines``. The format's
    citation of the lines returned is added (``page``, ``cell``...), when it has one.
    """
    if doc is None:
        return None
    text = doc.text
    lines = _split(text)
    total = len(lines)
    last = total if last is None else last
    stop = min(last, total, first + max_lines - 1)
    body = "\n".join(lines[first - 1 : stop])
    out: dict[str, Any] = {
        "start_line": first,
        "end_line": max(stop, first - 1),
        "text": body,
        "total_lines": total,
        "truncated": stop < min(last, total),
    }
    if doc.citations is not None and body and first <= total:
        start = sum(len(line) + 1 for line in lines[: first - 1])
        out.update(doc.citations.of(start, start + len(body)))
    return out
