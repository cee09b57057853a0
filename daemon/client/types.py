"""The answers of :class:`~ingestd.daemon.client.Client`, typed.

They are the JSON the control socket carries (what ``ingestd search --json`` prints),
so a daemon and the local state dir answer alike; the payload keys are those of
docs/reference/payload.md.
"""

from __future__ import annotations

from typing import Any, Required, TypedDict

__all__ = ["Chunk", "Hit", "Lines", "ReadResult", "Section", "SyncReport"]


class Hit(TypedDict, total=False):
    """A search hit: the point's payload plus its id, score, rank and mode.

    ``score`` is the mode's: cosine (dense), BM25 (sparse) or the RRF score (hybrid).
    ``dense_rank``/``dense_score`` and ``sparse_rank``/``sparse_score`` come with
    ``ranks=True`` (``None`` beyond that ranking's ``search.candidates``); ``parent``
    (the enclosing section's payload) with ``expand=True``.
    """

    id: Required[str]
    score: Required[float]
    rank: Required[int]
    mode: Required[str]
    source: Required[str]
    path: Required[str]
    start_line: Required[int]
    end_line: Required[int]
    heading_path: list[str]
    text: Required[str]
    ordinal: int
    start_char: int
    end_char: int
    n_tokens: int
    doc_hash: str
    chunk_hash: str
    chunker: str
    rule: str
    parent_id: str
    dense_rank: int | None
    dense_score: float | None
    sparse_rank: int | None
    sparse_score: float | None
    parent: dict[str, Any]


class Chunk(TypedDict, total=False):
    """A chunk of a document, as ``read`` lists it (``text`` when reading a hit)."""

    id: Required[str]
    ordinal: Required[int]
    start_line: Required[int]
    end_line: Required[int]
    heading_path: Required[list[str]]
    text: str


class Section(TypedDict):
    """The section enclosing a hit: its heading path and lines (1-based, inclusive)."""

    heading_path: list[str]
    start_line: int
    end_line: int


class Lines(TypedDict):
    """Verbatim lines of a file (1-based, inclusive), as the file is now."""

    start_line: int
    end_line: int
    text: str
    total_lines: int
    truncated: bool


class ReadResult(TypedDict):
    """What ``read`` returns (see :func:`ingestd.daemon.commands.read.read`)."""

    source: str
    path: str
    hit: Chunk | None
    chunks: list[Chunk]
    section: Section | None
    lines: Lines | None
    stale: bool


class SyncReport(TypedDict):
    """What ``sync`` returns (see :func:`ingestd.daemon.commands.sync.sync`)."""

    sources: list[dict[str, Any]]
    complete: bool
    seconds: float
    summary: list[str]
    through_daemon: bool
