"""The packing unit: a stretch of a section that the packer takes whole.

:class:`~ingestd.chunkers.packing.cutting.Cutter` turns sections into units (whole sections
that fit, else blocks; a block over budget into paragraphs, items and lines; a line
into token windows), and :class:`~ingestd.chunkers.packing.packer.Packer` packs runs of
consecutive units into chunks, cutting a unit further when it does not fit. Offsets
are ``str`` indices into the packed text; ``tok`` is in budget tokens, ``mtok`` in
model word pieces.
"""

from __future__ import annotations

__all__ = ["SECTION", "WINDOW", "Unit"]

#: :attr:`Unit.body` of a window: a piece of a line cut at piece or token boundaries.
WINDOW = -2
#: :attr:`Unit.body` of a whole section taken as one unit.
SECTION = -3


class Unit:
    """A stretch ``text[start:end]`` of section ``sec``, taken whole into a chunk.

    Attributes:
        start: offset of its first character (a line start, but for windows).
        end: offset one past its last non-whitespace character.
        next: offset where the next unit starts (the blanks up to it are its own).
        tok: budget tokens of ``text[start:next]``.
        sec: index of its section.
        first: it opens its section (a chunk may end before it).
        anchor: a candidate cut point: a chunk that holds ``min_tokens`` ends before
            it when a lead is glued before it or its content hash says so (see
            :mod:`~ingestd.chunkers.packing.packer`).
        carry: context line for a chunk that starts with it (a table's header row, a
            code block's opening fence line, an introducing sentence), or ``""``.
        exact: ``tok`` adds up with its neighbours' counts (else the chunk is
            recounted).
        body: where its block proper starts (after a glued heading or intro), or
            :data:`WINDOW` or :data:`SECTION`.
        mtok: model word pieces of ``text[start:next]``, -1 when not counted.
        lead: a heading with nothing after it in its block: it never ends a chunk.
    """

    __slots__ = (
        "anchor", "body", "carry", "end", "exact", "first", "lead", "mtok", "next", "sec",
        "start", "tok",
    )  # fmt: skip

    def __init__(
        self, start: int, end: int, nxt: int, tok: int, sec: int, first: bool = False,
        anchor: bool = False, carry: str = "", exact: bool = True, body: int = -1,
        mtok: int = -1, lead: bool = False,
    ) -> None:  # fmt: skip
        self.start, self.end, self.next, self.tok, self.sec = start, end, nxt, tok, sec
        self.first, self.anchor, self.carry, self.exact = first, anchor, carry, exact
        self.body = start if body == -1 else body
        self.mtok = mtok
        self.lead = lead
