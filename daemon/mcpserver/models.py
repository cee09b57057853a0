"""The MCP tools' structured results (their output schemas), and their text renderings.

Each tool answers twice: ``structuredContent`` validated against these pydantic
models (the tool's ``outputSchema``), and a short text for clients that show text
only. Field names are those of the payload (docs/reference/payload.md) and of ``ingestd
search --json``, so a hit reads the same everywhere. A hit, a passage and a chunk
declare every citation key (:class:`Cited`: the keys of
:data:`~ingestd.store.search.citation.CITE_KEYS`), so none is dropped on the way.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from ingestd.chunkers.readers.document import cite_text
from ingestd.store.search.citation import version_text

__all__ = [
    "ChunkOut",
    "Citation",
    "Cited",
    "DaemonOut",
    "FileLines",
    "HitOut",
    "IndexingOut",
    "PassageOut",
    "ReadOut",
    "SearchOut",
    "SectionOut",
    "SourceStatus",
    "StatusOut",
    "SyncOut",
    "SyncedSource",
    "Versioned",
    "search_text",
    "status_out",
]


class Citation(BaseModel):
    """A format's own coordinates of a chunk or of lines (absent for text files).

    ``start_line``/``end_line`` count lines of the text ingestd reads of a file: the file
    itself for text formats, the text extracted from a notebook, HTML page or PDF
    (what ``read`` returns); these fields cite the original.
    """

    page: int | None = Field(None, description="PDF: page of the first character (1-based).")
    end_page: int | None = Field(None, description="PDF: page of the last character.")
    cell: int | None = Field(None, description="Notebook: first cell (1-based).")
    end_cell: int | None = Field(None, description="Notebook: last cell.")
    cell_start_line: int | None = Field(None, description="Notebook: first line, in `cell`.")
    cell_end_line: int | None = Field(None, description="Notebook: last line, in `end_cell`.")
    file_start_line: int | None = Field(None, description="HTML: first line of the HTML file.")
    file_end_line: int | None = Field(None, description="HTML: last line of the HTML file.")


class Versioned(BaseModel):
    """The version of a versioned source (a git repository) a text is from (else absent)."""

    version: str | None = Field(
        None,
        description="For a versioned source (a git repository): the branch or tag the text "
        "is from; pass it to search(version=...) and read(version=...).",
    )
    commit: str | None = Field(
        None, description="For a versioned source: the commit of that version it was read at."
    )


class Cited(Citation, Versioned):
    """Where a text is beyond its file and lines: the format's coordinates, its version."""


class HitOut(Cited):
    """One search hit."""

    rank: int = Field(description="1-based position in the ranking.")
    id: str = Field(description="Chunk id: pass it to read(id=...) to widen the hit.")
    score: float = Field(
        description="The mode's score: reciprocal rank fusion (hybrid), cosine (dense), BM25 "
        "(sparse). Only its order matters."
    )
    source: str = Field(description="The configured source the file belongs to.")
    path: str = Field(description="The file, relative to its source's root.")
    start_line: int = Field(
        description="First line of the chunk in the file, or in the text extracted from it "
        "(1-based)."
    )
    end_line: int = Field(description="Last line of the chunk (inclusive).")
    heading_path: list[str] = Field(description="Headings above the chunk, outermost first.")
    text: str = Field(description="The chunk, verbatim from the file.")
    configured: bool = Field(
        True,
        description="False for a source the config no longer has: not watched or synced, "
        "so the hit may be out of date (the notes say so).",
    )


class PassageOut(Cited):
    """Hits of one file that overlap or touch, merged into one verbatim span.

    Its citation runs from its first hit's to its last's (a PDF passage: ``page`` and
    ``end_page``).
    """

    rank: int = Field(description="1-based position: page by page, a page's passages by rank.")
    score: float = Field(description="Its best hit's score. Only the order matters.")
    page_rank: int = Field(0, description="1-based place of its file among the answer's files.")
    page_score: float = Field(
        0.0, description="Its file's score from all its hits ranked. Only the order matters."
    )
    source: str
    path: str = Field(description="The file, relative to its source's root.")
    start_line: int = Field(
        description="First line of the passage in the file, or in the text extracted from "
        "it (1-based)."
    )
    end_line: int = Field(description="Last line (inclusive).")
    start_char: int = Field(description="Start in the file's decoded text, in characters.")
    end_char: int = Field(description="End (exclusive), in characters.")
    heading_path: list[str] = Field(description="Headings above the whole passage.")
    ids: list[str] = Field(description="Its chunks' ids: read(id=...) widens one.")
    n_tokens: int = Field(description="Tokens of text (cl100k_base).")
    truncated: bool = Field(description="Cut to fit the budget (its best hit alone is larger).")
    text: str = Field(description="The passage, verbatim from the file.")


class IndexingOut(BaseModel):
    """Documents still being indexed (the index is being built or brought up to date)."""

    documents: int = Field(description="Documents of the sources searched not yet written.")
    sources: list[str]


class SearchOut(BaseModel):
    """What ``search`` found."""

    query: str = Field(description="The query as searched (cut when over the model's window).")
    mode: str = Field(description="The ranking used: hybrid, dense or sparse.")
    passages: list[PassageOut] | None = Field(
        None,
        description="With budget_tokens: the best hits, those of one file that overlap or "
        "touch merged, best first, within the budget.",
    )
    hits: list[HitOut] = Field(
        description="Without a budget: the best chunks, best first; empty when nothing "
        "matched. With a budget: empty (the passages hold their text)."
    )
    budget_tokens: int | None = None
    tokens: int | None = Field(None, description="Tokens of the passages (cl100k_base).")
    notes: list[str] = Field(
        default_factory=list,
        description="What the reader should know: a query cut to the model's window, "
        "documents still being indexed.",
    )
    indexing: IndexingOut | None = Field(
        None, description="Documents still being indexed: results may miss them."
    )


class ChunkOut(Cited):
    """A chunk of a document."""

    id: str
    ordinal: int = Field(description="Position of the chunk in its document (0-based).")
    start_line: int
    end_line: int
    heading_path: list[str]
    text: str | None = Field(None, description="The chunk (when reading a hit).")


class SectionOut(BaseModel):
    """The section that encloses a hit."""

    heading_path: list[str]
    start_line: int
    end_line: int


class FileLines(Citation):
    """Verbatim lines of the file as it is on disk now (or of the text extracted from it)."""

    start_line: int
    end_line: int
    text: str
    total_lines: int = Field(description="Lines in the whole file.")
    truncated: bool = Field(description="More lines were asked for than max_lines allows.")


class ReadOut(BaseModel):
    """What ``read`` returned."""

    source: str
    path: str
    version: str | None = Field(None, description="The branch or tag (a versioned source).")
    commit: str | None = Field(None, description="The commit that version is at.")
    hit: ChunkOut | None = Field(description="The chunk of the id asked for.")
    chunks: list[ChunkOut] = Field(
        description="Document order: the hit and its neighbours, or the chunks overlapping "
        "the lines asked for."
    )
    section: SectionOut | None = Field(description="The section enclosing the hit.")
    lines: FileLines | None = Field(description="The file's lines; null when unreadable now.")
    stale: bool = Field(
        description="The file changed since it was indexed: lines are today's, chunks the "
        "index's. Call sync, then search again."
    )
    budget_tokens: int | None = None
    tokens: int | None = Field(None, description="Tokens of the lines (cl100k_base).")


class SourceStatus(BaseModel):
    """How current one source's index is."""

    source: str
    root: str
    collection: str
    documents: int
    chunks: int
    failed: int = Field(description="Documents that could not be indexed (see failed_documents).")
    failed_documents: list[dict[str, str]] = Field(description="path and error, at most 50.")
    last_sync: float | None = Field(
        description="End of the last complete sync, seconds since the epoch (null: never)."
    )
    last_sync_age_s: float | None = Field(description="Seconds since last_sync.")
    last_change_synced: float | None = Field(
        description="When a change to the files last became searchable (a watched edit "
        "included), seconds since the epoch."
    )
    last_change_age_s: float | None = Field(description="Seconds since last_change_synced.")
    root_missing: bool = Field(description="The source's folder is not there (unmounted?).")
    healthy: bool = Field(description="Its root is there, watched, and its last job succeeded.")
    error: str | None = Field(None, description="The daemon's last error for this source.")
    failing_for_s: float | None = Field(
        None, description="Seconds since this source's failures began (with `error`)."
    )
    refs: list[dict[str, Any]] | None = Field(
        None,
        description="A git source's versions: version (branch or tag), ref and commit "
        "indexed; with fetched_at and failing_since beside.",
    )
    fetched_at: float | None = Field(None, description="A git source's last good fetch.")
    failing_since: float | None = Field(
        None, description="A git source's fetches fail since then (the index keeps its refs)."
    )


class DaemonOut(BaseModel):
    """The running daemon."""

    pid: int | None = None
    phase: str | None = Field(None, description="starting, reconciling or watching.")
    healthy: bool
    pending_changes: int = Field(description="Changed paths and jobs waiting (all sources).")
    lag_seconds: float = Field(description="How long the oldest change not yet searchable waited.")
    model_loaded: bool | None = None


class StatusOut(BaseModel):
    """How current the index is."""

    state_dir: str
    daemon: DaemonOut | None = Field(
        description="The daemon keeping the index in sync; null when none runs (files "
        "edited since are not searchable until sync is called)."
    )
    healthy: bool
    sources: list[SourceStatus]


class SyncedSource(BaseModel):
    """What ``sync`` did for one source."""

    source: str
    scope: str | list[str] = Field(description='"scan" (the whole source) or the paths checked.')
    indexed: int = Field(description="Documents written.")
    deleted: int
    failed: int
    retry: list[str] = Field(description="Files that could not be read now (retried later).")
    held: list[str] = Field(description="Deletions held by the mass-deletion guard.")
    root_missing: bool


class SyncOut(BaseModel):
    """What ``sync`` did."""

    complete: bool = Field(
        description="Every change made before the call is searchable (else see summary)."
    )
    through_daemon: bool = Field(description="The running daemon did it (else this process).")
    seconds: float
    summary: list[str] = Field(description="One line per source: what was done, or why not all.")
    sources: list[SyncedSource]


def search_text(out: SearchOut) -> str:
    """The hits (or passages) as text: rank, file and lines, source, heading, id, the text.

    Notes come first; an empty answer names the mode that searched.
    """
    notes = "".join(f"note: {n}\n" for n in out.notes)
    if out.passages is not None:
        return notes + _passages_text(out)
    if not out.hits:
        return notes + f"no results for {out.query!r} ({out.mode} search)"
    parts = [notes.rstrip("\n")] if notes else []
    for h in out.hits:
        heading = " > ".join(h.heading_path)
        where = h.model_dump(exclude_none=True)
        head = f"{h.rank}. {h.path}{cite_text(where)} (source {h.source}"
        head += f", version {version_text(where)}" if h.version else ""
        head += f", {heading}" if heading else ""
        parts.append(f"{head}; score {h.score:.4g}; id {h.id})\n{h.text.strip()}")
    return "\n\n".join(parts)


def _passages_text(out: SearchOut) -> str:
    """Budgeted answer as text: per passage its place, tokens and chunk ids, then the text."""
    assert out.passages is not None
    if not out.passages:
        return f"no results for {out.query!r} ({out.mode} search)"
    pages = len({p.page_rank for p in out.passages})
    parts = [
        f"{len(out.passages)} passage(s) of {pages} file(s), {out.tokens} of "
        f"{out.budget_tokens} tokens"
    ]
    page = None
    for p in out.passages:
        if p.page_rank != page or page is None:  # a file once, its passages after it
            page = p.page_rank
            parts.append(f"== file {page}: {p.path} (source {p.source})")
        heading = " > ".join(p.heading_path)
        where = p.model_dump(exclude_none=True)
        head = f"{p.rank}. {p.path}{cite_text(where)} (source {p.source}"
        head += f", version {version_text(where)}" if p.version else ""
        head += f", {heading}" if heading else ""
        cut = ", cut to the budget" if p.truncated else ""
        head += f"; {p.n_tokens} tokens{cut}; ids {', '.join(p.ids)})"
        parts.append(f"{head}\n{p.text.strip()}")
    return "\n\n".join(parts)


def _age(ts: float | None, now: float) -> float | None:
    return None if ts is None else round(max(0.0, now - ts), 1)


def status_out(st: dict[str, Any], now: float | None = None) -> StatusOut:
    """:class:`StatusOut` from ``ingestd status --json``'s answer."""
    now = time.time() if now is None else now
    d = st.get("daemon")
    errors = dict((d or {}).get("last_error") or {})
    since = dict((d or {}).get("failing_since") or {})
    sources = []
    for s in st["sources"]:
        healthy = not (s.get("root_missing") or s.get("unwatched_folders") or s["source"] in errors)
        sources.append(
            SourceStatus(
                source=s["source"],
                root=s["root"],
                collection=s["collection"],
                documents=s["documents"],
                chunks=s["chunks"],
                failed=s["failed"],
                failed_documents=s.get("failed_documents") or [],
                last_sync=s.get("last_sync"),
                last_sync_age_s=_age(s.get("last_sync"), now),
                last_change_synced=s.get("last_change_synced"),
                last_change_age_s=_age(s.get("last_change_synced"), now),
                root_missing=bool(s.get("root_missing")),
                healthy=healthy,
                error=errors.get(s["source"]),
                failing_for_s=_age(since.get(s["source"]), now),
            )
        )
    daemon = None
    if d is not None:
        daemon = DaemonOut(
            pid=d.get("pid"),
            phase=d.get("phase"),
            healthy=bool(d.get("healthy", True)),
            pending_changes=int(d.get("queue_depth") or 0),
            lag_seconds=float(d.get("lag_seconds") or 0.0),
            model_loaded=d.get("model_loaded"),
        )
    healthy = daemon.healthy if daemon is not None else all(s.healthy for s in sources)
    return StatusOut(state_dir=st["state_dir"], daemon=daemon, healthy=healthy, sources=sources)
