"""The structure the section-based strategies share: sections of blocks, packed spans.

A parser (:mod:`~ingestd.chunkers.strategies.markdown`,
:mod:`~ingestd.chunkers.strategies.rst`) cuts the decoded text into :class:`Section`
objects, each a list of :class:`Block` spans;
:mod:`~ingestd.chunkers.markup.render` maps them onto the clean rendering, and
:mod:`~ingestd.chunkers.packing.packer` packs their blocks into :class:`Span` objects, which
become chunks. The context a chunk takes from its sections and blocks is built here
too: the heading path (:func:`heading_prefix`), the first line of a block it continues
(:func:`first_line`), the sentence that introduces the block it starts with
(:func:`intro_sentence`). Offsets are ``str`` indices; token counts are budget tokens.
This module imports none of those modules, so each of them can import it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import model_validator

from ingestd.chunkers.base import ChunkerOptions

__all__ = [
    "FILL_SHARE", "Block", "Section", "SectionOptions", "Span", "first_line", "heading_prefix",
    "intro_sentence", "introducer",
]  # fmt: skip

_SENTENCE_END = re.compile(r"[.!?]\s+(?=\S)")  # the last part: the last sentence
_INTRO_WORDS = 30
#: Default ``min_tokens`` as a share of ``max_tokens``. Measured with bench/retrieval.py on
#: the four dev sets (docs/benchmarks.md): with a quarter, chunks were 49-62 % full and
#: dense retrieval ranked the chunk holding an answer below other chunks of its page;
#: three quarters fills them to 69-80 %.
FILL_SHARE = 0.75


class SectionOptions(ChunkerOptions):
    """Options shared by the section-based strategies (``markdown``, ``rst``).

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200).
        section_levels: heading levels ``1..section_levels`` open a section (1-6,
            default 3); deeper headings stay inside their section.
        min_tokens: a chunk under this many tokens takes in the next section when the
            whole section fits, and goes on past an anchor block (0 turns merging off;
            default three quarters of ``max_tokens``: chunks are packed nearly full
            unless a section that does not fit whole starts, see :data:`FILL_SHARE`).
        heading_prefix: prefix the heading path (and the context line of a continued
            block) to the embedded text (default on).

    Raises:
        ValueError: a value out of its range.
    """

    max_tokens: int = 200
    section_levels: int = 3
    min_tokens: int | None = None
    heading_prefix: bool = True

    @model_validator(mode="after")
    def _check_sections(self) -> SectionOptions:
        if self.max_tokens <= 0:
            raise ValueError("max_tokens must be > 0")
        if not 1 <= self.section_levels <= 6:
            raise ValueError("section_levels must be between 1 and 6")
        if self.min_tokens is not None and not 0 <= self.min_tokens < self.max_tokens:
            raise ValueError("min_tokens must be >= 0 and < max_tokens")
        return self

    @property
    def merge_below(self) -> int:
        """``min_tokens``, or its default: :data:`FILL_SHARE` of ``max_tokens``."""
        if self.min_tokens is None:
            return int(self.max_tokens * FILL_SHARE)
        return self.min_tokens


@dataclass(slots=True)
class Block:
    """A unit of structure: paragraph, code block, table, list, directive, heading.

    Attributes:
        start: offset of its first character (the start of a line).
        end: offset one past its last non-whitespace character.
        next: offset of the next block's start (or of the end of the text).
        kind: ``"para"``, ``"fence"``, ``"code"``, ``"table"``, ``"list"``, ``"html"``,
            ``"heading"``, ``"directive"``...
        body: where the block proper starts when a heading is glued before it.
    """

    start: int
    end: int
    next: int
    kind: str
    body: int = -1

    def __post_init__(self) -> None:
        if self.body < 0:
            self.body = self.start


@dataclass(slots=True)
class Section:
    """Blocks under one heading. ``level`` is 0 for the text before the first heading."""

    path: tuple[str, ...]
    level: int
    blocks: list[Block]


@dataclass(slots=True)
class Span:
    """A packed chunk before it becomes a :class:`~ingestd.chunkers.base.Chunk`.

    Attributes:
        start: offset of its first character in the packed text.
        end: offset one past its last non-whitespace character.
        n_tokens: its budget tokens (``suffix`` included, ``prefix`` excluded).
        path: the heading path of its sections (the common part, when it spans several).
        prefix: the text embedded before it (heading path, context line).
        n_model: model word pieces of its text (prefix excluded), -1 if not counted.
        suffix: the closing fence of a code block the chunk ends inside, else ``""``.
    """

    start: int
    end: int
    n_tokens: int
    path: tuple[str, ...]
    prefix: str
    n_model: int = -1
    suffix: str = ""


def first_line(text: str, blk: Block) -> str:
    """The first line of ``blk``'s body with whitespace runs collapsed (chunk context)."""
    eol = text.find("\n", blk.body, blk.end)
    return " ".join(text[blk.body : eol if eol != -1 else blk.end].split())


def intro_sentence(text: str, blk: Block) -> str:
    """Context for a chunk that starts at ``blk``'s body: the introducing sentence.

    The last sentence (at most 30 words) of the paragraph ending in ``:`` glued before
    the body (a list, code block or table), else ``""``.
    """
    k = blk.body - 1
    while k > blk.start and text[k].isspace():
        k -= 1
    if text[k] != ":":  # the common case: a heading glued to its first block
        return ""
    lead = text[blk.start : k + 1]
    para = lead[lead.rfind("\n\n") + 1 :].strip()
    if para.startswith("#"):
        return ""
    tail = para[-1000:]  # the last sentence is usually in here
    parts = _SENTENCE_END.split(tail)
    words = parts[-1].split()
    if len(parts) == 1 and len(tail) < len(para) and len(words) <= _INTRO_WORDS:
        words = _SENTENCE_END.split(para)[-1].split()
    return " ".join(words[-_INTRO_WORDS:])


def introducer(kinds: frozenset[str]) -> Callable[[str, Block], str]:
    """A strategy's ``intro``: :func:`intro_sentence` before blocks of ``kinds``, else ``""``.

    Args:
        kinds: the block kinds a paragraph ending in ``:`` introduces in the strategy's
            markup (``list``, ``fence``, ``table`` ...).

    Returns:
        ``(text, block) -> str``, as :class:`~ingestd.chunkers.packing.packer.Packer`
        takes it.
    """

    def intro(text: str, blk: Block) -> str:
        return intro_sentence(text, blk) if blk.kind in kinds else ""

    return intro


def heading_prefix(path: tuple[str, ...], title: str | None) -> str:
    r"""``"Title > A > B\n\n"``, without repeating a title that the first heading repeats."""
    parts = list(path)
    if title and not (parts and parts[0].casefold() == title.casefold()):
        parts.insert(0, title)
    return " > ".join(parts) + "\n\n" if parts else ""
