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

    A format's own citation comes with its hits (docs/guides/formats.md): ``page`` and
    ``end_page`` (PDF), ``cell``, ``end_cell``, ``cell_start_line``, ``cell_end_line`` and
    ``language`` (notebooks), ``file_start_line`` and ``file_end_line`` (HTML); for those
    formats ``start_line``/``end_line`` count lines of the extracted text.

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
    page: int
    end_page: int
    cell: int
    end_cell: int
    cell_start_line: int
    cell_end_line: int
    file_start_line: int
    file_end_line: int
    language: str
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
    """A chunk of a document, as ``read`` lists it (``text`` when reading a hit).

    With a format's own citation, as in :class:`Hit` (``page``, ``cell``...).
    """

    id: Required[str]
    ordinal: Required[int]
    start_line: Required[int]
    end_line: Required[int]
    heading_path: Required[list[str]]
    text: str
    page: int
    end_page: int
    cell: int
    end_cell: int
    cell_start_line: int
    cell_end_line: int
    file_start_line: int
    file_end_line: int


class Section(TypedDict):
    """The section enclosing a hit: its heading path and lines (1-based, inclusive)."""

    heading_path: list[str]
    start_line: int
    end_line: int


class Lines(TypedDict, total=False):
    """Verbatim lines of a file (1-based, inclusive), as the file is now.

    For a notebook, HTML page or PDF: lines of the text extracted from it, with the
    format's own citation of them (``page``, ``cell``..., as in :class:`Hit`).
    """

    start_line: Required[int]
    end_line: Required[int]
    text: Required[str]
    total_lines: Required[int]
    truncated: Required[bool]
    page: int
    end_page: int
    cell: int
    end_cell: int
    cell_start_line: int
    cell_end_line: int
    file_start_line: int
    file_end_line: int


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
