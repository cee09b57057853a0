"""The shared chunk record, the sizer and budget abstractions, and the chunker base class.

Units used throughout ``ingestd.chunkers``:

* offsets (``start``, ``end``) are **characters** (Python ``str`` indices) into the
  *decoded text* (see :func:`ingestd.chunkers.text.decode`), ``end`` exclusive;
* lines are **1-based**, ``end_line`` inclusive (the line holding ``end - 1``);
* token counts are **tokens of the budget sizer** (tiktoken ``cl100k_base`` by default),
  while ``n_model_tokens`` counts word pieces of the embedding model's own tokenizer
  (special tokens excluded).

A chunker never loads a model: what it needs (sizers, an embedding callable for the
semantic strategy) comes in a :class:`ChunkContext`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ingestd.chunkers.readers.document import TEXT_READER, Extracted, Reader

__all__ = [
    "Budget",
    "Chunk",
    "ChunkContext",
    "Chunker",
    "ChunkerOptions",
    "EmbedFn",
    "LineIndex",
    "Sizer",
    "cite_chunks",
    "strip_span",
]

#: An embedding callable: ``n`` texts -> array of shape ``(n, dim)``, float32, unit norm.
EmbedFn = Callable[[Sequence[str]], Any]


@runtime_checkable
class Sizer(Protocol):
    """Measures text in tokens.

    ``name`` identifies the tokenizer in rule fingerprints (e.g. ``"tiktoken:cl100k_base"``).
    """

    name: str

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text`` (no special tokens added)."""
        ...

    def boundaries(self, text: str) -> list[int]:
        """Return the character offsets at which the tokens of ``text`` end.

        The list is strictly increasing, its last item is ``len(text)`` (for non-empty
        text), and every offset is a ``str`` index: a token that ends inside a
        multi-byte character is merged with the next one, so a slice at a boundary
        never splits a character.
        """
        ...


@dataclass(frozen=True, slots=True)
class Budget:
    """The size limit a chunk must respect.

    Attributes:
        sizer: counts budget tokens (``max_tokens`` is in its units).
        max_tokens: the budget, in ``sizer`` tokens.
        model_sizer: the embedding model's own tokenizer, or ``None`` to skip that check.
        model_max_tokens: most word pieces the model reads, special tokens excluded
            (``max_seq_length - 2``: 254 for all-MiniLM-L6-v2).
    """

    sizer: Sizer
    max_tokens: int
    model_sizer: Sizer | None = None
    model_max_tokens: int = 0

    def __post_init__(self) -> None:
        if self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be > 0, got {self.max_tokens}")

    def count(self, text: str) -> int:
        """Budget tokens in ``text``."""
        return self.sizer.count(text)

    def fits(self, text: str, prefix: str = "") -> bool:
        """Whether ``text`` fits the budget and, with ``prefix`` before it, the model."""
        if self.sizer.count(text) > self.max_tokens:
            return False
        if self.model_sizer is not None:
            return self.model_sizer.count(prefix + text) <= self.model_max_tokens
        return True

    def with_max(self, max_tokens: int) -> Budget:
        """A copy with another ``max_tokens`` (same sizers)."""
        return Budget(self.sizer, max_tokens, self.model_sizer, self.model_max_tokens)


@dataclass(slots=True)
class Chunk:
    """One chunk: a verbatim slice of the decoded text plus what is known about it.

    A record to read, not to change (not frozen: a frozen dataclass takes three times
    as long to build, which shows in chunking throughput).

    Attributes:
        text: ``document[start:end]``, verbatim (never trimmed or rewritten).
        start: offset of the first character, in characters.
        end: offset one past the last character, in characters.
        start_line: 1-based line of ``start``.
        end_line: 1-based line of ``end - 1`` (inclusive).
        n_tokens: length of :attr:`clean_text` in budget tokens (the part the budget
            limits; the prefix and a re-fenced code block's closing line only count
            against the model's limit).
        heading_path: enclosing section titles, outermost first (may be empty).
        prefix: context prepended to the chunk for embedding (e.g. the heading path);
            the chunk hash covers :attr:`embed_text`.
        meta: strategy-specific extras that go to the payload (e.g. ``start_token``).
        parent: index, in the same chunk list, of this chunk's parent (hierarchical
            strategy), else ``None``.
        is_parent: ``True`` for a parent section that is stored for context
            (``search --expand``) rather than searched.
        clean: the chunk as the model reads it, prefix excluded, when that is not
            ``text`` itself: the clean rendering of the structured strategies (link
            targets, HTML, attribute lists... left out; a split code block re-fenced),
            else ``None``. ``n_tokens`` counts it (see :attr:`clean_text`).
    """

    text: str
    start: int
    end: int
    start_line: int
    end_line: int
    n_tokens: int
    heading_path: tuple[str, ...] = ()
    prefix: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)
    parent: int | None = None
    is_parent: bool = False
    clean: str | None = None

    @property
    def clean_text(self) -> str:
        """The chunk as the model reads it, without the prefix: ``clean`` or ``text``."""
        return self.text if self.clean is None else self.clean

    @property
    def embed_text(self) -> str:
        """The exact text given to the embedding model: ``prefix + clean_text``."""
        return self.prefix + (self.text if self.clean is None else self.clean)


class LineIndex:
    r"""Maps character offsets of one text to 1-based line numbers in O(log n).

    Attributes:
        lines: the text split at ``"\n"`` (a trailing newline leaves an empty last
            line), shared with parsers so that a text is split once.
        longest: length of the longest line, in characters.
    """

    __slots__ = ("_starts", "lines", "longest")

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        lengths = list(map(len, self.lines))
        self.longest = max(lengths)
        self._starts = list(accumulate(map((1).__add__, lengths), initial=0))
        self._starts.pop()  # the end of the last line

    def line_of(self, offset: int) -> int:
        """1-based line holding the character at ``offset``."""
        return bisect.bisect_right(self._starts, offset)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """``(start_line, end_line)`` of the slice ``[start, end)`` (``end_line`` inclusive)."""
        return self.line_of(start), self.line_of(max(start, end - 1))

    @property
    def starts(self) -> list[int]:
        """Offset of the first character of each line (``starts[k]`` is line ``k + 1``)."""
        return self._starts

    def line_start(self, line: int) -> int:
        """Offset of the first character of 1-based ``line``."""
        return self._starts[line - 1]

    @property
    def n_lines(self) -> int:
        """Number of lines (a trailing newline opens an empty last line)."""
        return len(self._starts)


@dataclass(frozen=True, slots=True)
class ChunkContext:
    """What a chunker may use, handed in by the caller.

    Attributes:
        sizer: the budget tokenizer (tiktoken by default).
        model_sizer: the embedding model's tokenizer, or ``None`` when chunks are not
            held to the model's length (``fit_model: false``).
        model_max_tokens: word pieces the model reads, special tokens excluded.
        embed: embedding callable for the semantic strategy, else ``None``.
    """

    sizer: Sizer
    model_sizer: Sizer | None = None
    model_max_tokens: int = 254
    embed: EmbedFn | None = None

    def budget(self, max_tokens: int) -> Budget:
        """A :class:`Budget` of ``max_tokens`` with this context's model limit."""
        return Budget(self.sizer, max_tokens, self.model_sizer, self.model_max_tokens)


class ChunkerOptions(BaseModel):
    """Base of every strategy's options (the ``params`` of a rule).

    Options are frozen and reject unknown keys; each strategy subclasses this with its
    own fields and defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int = 200


class Chunker:
    """Base class of the chunking strategies.

    Subclasses set ``name`` (the config name), ``version`` (bump when output for the
    same input and options changes: it is part of the rule fingerprint) and
    ``Options``, and implement :meth:`chunk`.

    Args:
        options: validated options of the strategy.
        ctx: sizers and callables the strategy may use.

    Raises:
        ValueError: options that cannot work (e.g. overlap not below the budget).
    """

    name: ClassVar[str]
    version: ClassVar[int] = 1
    Options: ClassVar[type[ChunkerOptions]] = ChunkerOptions

    def __init__(self, options: ChunkerOptions, ctx: ChunkContext) -> None:
        self.options = options
        self.ctx = ctx
        self.budget = ctx.budget(options.max_tokens)

    def chunk(self, text: str) -> list[Chunk]:
        """Split decoded ``text`` into chunks, in document order.

        Every chunk is a verbatim slice (``text[c.start:c.end] == c.text``); the same
        input always gives the same output.
        """
        raise NotImplementedError

    @classmethod
    def reader(cls, options: ChunkerOptions) -> Reader:
        """The reader of this strategy's files (bytes -> the text chunks slice).

        Text strategies read with :data:`~ingestd.chunkers.readers.document.TEXT_READER`
        (the decoded-text contract); a format's strategy returns its own reader, which
        may depend on ``options`` (a notebook's kept outputs, a PDF's page bound).
        Building it loads no parser: readers import theirs when they read.
        """
        return TEXT_READER

    def read(self, data: bytes) -> Extracted:
        """The document of a file's bytes, read by :meth:`reader`.

        Raises:
            UndecodableError: the bytes are not a readable document (the message says why).
        """
        return self.reader(self.options).read(data)

    def chunk_document(self, doc: Extracted) -> list[Chunk]:
        """Chunk a document from :meth:`read`: :meth:`chunk` of its text, cited.

        Each chunk's ``meta`` takes the document's extras and the format's citation of
        its span (``page``, ``cell``..., see
        :data:`~ingestd.chunkers.readers.document.CITATION_KEYS`). Strategies that use
        the reader's out-of-band structure (a PDF's headings) override this.
        """
        return cite_chunks(self.chunk(doc.text), doc)

    # -- helpers for subclasses -------------------------------------------------

    def make_chunk(
        self,
        text: str,
        lines: LineIndex,
        start: int,
        end: int,
        *,
        heading_path: tuple[str, ...] = (),
        prefix: str = "",
        meta: Mapping[str, Any] | None = None,
        n_tokens: int | None = None,
    ) -> Chunk:
        """Build the :class:`Chunk` for ``text[start:end]`` with lines and token count."""
        piece = text[start:end]
        start_line, end_line = lines.span(start, end)
        return Chunk(
            text=piece,
            start=start,
            end=end,
            start_line=start_line,
            end_line=end_line,
            n_tokens=self.budget.count(piece) if n_tokens is None else n_tokens,
            heading_path=heading_path,
            prefix=prefix,
            meta=dict(meta or {}),
        )


def cite_chunks(chunks: list[Chunk], doc: Extracted) -> list[Chunk]:
    """``chunks`` with ``doc``'s extras and citations added to each one's ``meta`` (in place)."""
    if doc.citations is None and not doc.meta:
        return chunks
    for c in chunks:
        c.meta = {**c.meta, **doc.cite(c.start, c.end)}
    return chunks


def strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` so that it neither starts nor ends with whitespace.

    Returns ``(start, start)`` when the span is all whitespace.
    """
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
