"""The answers of :class:`~ingestd.daemon.client.Client`, typed.

They are the JSON the control socket carries (what ``ingestd search --json`` prints),
so a daemon and the local state dir answer alike; the payload keys are those of
docs/reference/payload.md. A hit, a passage and a chunk carry the citation keys of
:data:`~ingestd.store.search.citation.CITE_KEYS` their text has (:class:`Citation` and
:class:`Versioned`).
"""

from __future__ import annotations

from typing import Any, Required, TypedDict

__all__ = [
    "Answer",
    "Chunk",
    "Citation",
    "Hit",
    "Lines",
    "Passage",
    "ReadResult",
    "Section",
    "SyncReport",
    "Versioned",
]


class Citation(TypedDict, total=False):
    """A format's own citation of a chunk or of lines (docs/guides/formats.md).

    ``page``/``end_page`` (PDF), ``cell``/``end_cell`` and the lines within the cell
    (notebooks), the source file's lines (HTML); the keys of
    :data:`ingestd.chunkers.readers.document.CITATION_KEYS`.
    """

    page: int
    end_page: int
    cell: int
    end_cell: int
    cell_start_line: int
    cell_end_line: int
    file_start_line: int
    file_end_line: int


class Versioned(TypedDict, total=False):
    """The version of a versioned source (a git repository) a text is from.

    ``version``: the branch or tag name; ``commit``: the commit of that version the text
    was read at (the keys of :data:`~ingestd.store.search.citation.VERSION_KEYS`).
    """

    version: str
    commit: str


class Hit(Citation, Versioned, total=False):
    """A search hit: the point's payload plus its id, score, rank and mode.

    A format's own citation comes with its hits (docs/guides/formats.md): ``page`` and
    ``end_page`` (PDF), ``cell``, ``end_cell``, ``cell_start_line``, ``cell_end_line`` and
    ``language`` (notebooks), ``file_start_line`` and ``file_end_line`` (HTML); for those
    formats ``start_line``/``end_line`` count lines of the extracted text. A hit of a
    versioned source carries its ``version`` and ``commit``.

    ``score`` is the mode's: cosine (dense), BM25 (sparse) or the RRF score (hybrid).
    ``dense_rank``/``dense_score`` and ``sparse_rank``/``sparse_score`` come with
    ``ranks=True``, the default of :meth:`~ingestd.daemon.client.Client.search` (as
    ``ingestd search --json`` prints them; ``None`` beyond that ranking's
    ``search.candidates``, and the dense ones in ``sparse`` mode); ``parent`` (the
    enclosing section's payload) with ``expand=True``.
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


class Passage(Citation, Versioned, total=False):
    """Hits of one document that overlap or touch, merged: a verbatim span of it.

    ``rank`` and ``score`` are its best hit's; ``ids`` its chunks' ids in document order
    (its hits', and those of a few lines between two of them that joined them);
    ``page_rank`` its document's place among the answer's pages (1-based) and ``page_score``
    that page's score; ``n_tokens`` the tokens of ``text`` by the index's budget tokenizer
    (cl100k_base by default); ``truncated``: cut to fit a budget smaller than its best hit.
    Offsets in characters of the decoded file (or of the text extracted from it), lines
    1-based and inclusive. Its citation runs from its first hit's to its last's (``page`` of
    the first, ``end_page`` of the last), with the version and commit of a versioned source,
    as in :class:`Hit`.
    """

    rank: Required[int]
    score: Required[float]
    source: Required[str]
    path: Required[str]
    start_char: Required[int]
    end_char: Required[int]
    start_line: Required[int]
    end_line: Required[int]
    heading_path: Required[list[str]]
    ids: Required[list[str]]
    n_tokens: Required[int]
    truncated: Required[bool]
    text: Required[str]
    page_rank: Required[int]
    page_score: Required[float]


class Answer(list[Any]):
    """What :meth:`~ingestd.daemon.client.Client.search` returns: a list with facts.

    The list holds the hits (:class:`Hit`), or, with a token budget, the passages
    (:class:`Passage`), best first.

    Attributes:
        query: the query as searched (cut to the model's window when longer).
        mode: the ranking used (``dense`` for a collection without BM25 vectors).
        hits: the hits (with a budget: those the passages were made of).
        passages: the passages, or ``None`` without a budget.
        tokens: tokens of the passages, or ``None``.
        notes: sentences for the reader (a cut query, documents still being indexed).
        indexing: ``None``, or ``documents`` still being indexed and their ``sources``.
    """

    def __init__(self, answer: dict[str, Any]) -> None:
        passages = answer.get("passages")
        super().__init__(passages if passages is not None else answer["hits"])
        self.query: str = answer.get("query", "")
        self.mode: str = answer.get("mode", "")
        self.hits: list[Hit] = answer["hits"]
        self.passages: list[Passage] | None = passages
        self.tokens: int | None = answer.get("tokens")
        self.notes: list[str] = list(answer.get("notes") or [])
        self.indexing: dict[str, Any] | None = answer.get("indexing")

    def pages(self) -> list[list[Passage]]:
        """The passages page by page: a list per page, in page order, its spans in rank order.

        Each page is listed once (passages come page by page already); ``[]`` without a
        budget.
        """
        out: dict[int, list[Passage]] = {}
        for p in self.passages or []:
            out.setdefault(p["page_rank"], []).append(p)
        return [out[n] for n in sorted(out)]


class Chunk(Citation, Versioned, total=False):
    """A chunk of a document, as ``read`` lists it (``text`` when reading a hit).

    With a format's own citation, and a version and commit, as in :class:`Hit`.
    """

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


class Lines(Citation, total=False):
    """Verbatim lines of a file (1-based, inclusive), as the file is now.

    For a notebook, HTML page or PDF: lines of the text extracted from it, with the
    format's own citation of them (``page``, ``cell``..., as in :class:`Hit`).
    """

    start_line: Required[int]
    end_line: Required[int]
    text: Required[str]
    total_lines: Required[int]
    truncated: Required[bool]


class ReadResult(Versioned, total=False):
    """What ``read`` returns (see :func:`ingestd.daemon.commands.query.read.read`).

    ``budget_tokens`` and ``tokens`` (of the lines' text) come with a budget;
    ``version`` and ``commit`` (the commit that version is at) for a document of a
    versioned source.
    """

    source: Required[str]
    path: Required[str]
    hit: Required[Chunk | None]
    chunks: Required[list[Chunk]]
    section: Required[Section | None]
    lines: Required[Lines | None]
    stale: Required[bool]
    budget_tokens: int
    tokens: int


class SyncReport(TypedDict):
    """What ``sync`` returns (see :func:`ingestd.daemon.commands.index.sync.sync`)."""

    sources: list[dict[str, Any]]
    complete: bool
    seconds: float
    summary: list[str]
    through_daemon: bool
