r"""The clean rendering of a document: the text the model reads, mapped to the document.

A :class:`Rendering` applies *edits* (``(start, end, replacement)``, from
:mod:`~ingestd.chunkers.markup.noise`) to the decoded text and keeps the map between the
two texts. The structured strategies parse the document, render it, pack the blocks
of the rendering (so the token budget and the model's limit are spent on the words
that are embedded, not on link targets), and map each chunk back: its ``text`` and
offsets are verbatim document slices, its embedded text is the rendering.

Rules that keep the rendering's lines in step with the document's, so that every block
starts at a line start in both (where token counts add up, see
:mod:`~ingestd.chunkers.sizing.spans`):

* a line left with nothing but whitespace is left out whole, with its newline;
* an edit that runs over a line end from the middle of a line becomes a newline;
* overlapping or touching edits are merged (their replacement is a space if one of
  them had one).

Chunks of the rendering become document spans that tile the body (:meth:`place`):
what the rendering leaves out between two chunks (a reference definition, a comment)
goes to the earlier chunk's text, what precedes the first chunk to the first one.
"""

from __future__ import annotations

import bisect
from itertools import accumulate
from operator import add, sub

from ingestd.chunkers.markup.noise import Edit
from ingestd.chunkers.readers.expansion import OutputBudget
from ingestd.chunkers.sections import Block, Section

__all__ = ["Rendering"]


class Rendering:
    """``source`` with ``edits`` applied, and the map between the two texts.

    Args:
        source: the decoded document.
        edits: ``(start, end, replacement)`` over ``source``, in any order; they may
            overlap.
        body: where the document's body starts; a body that would render to nothing
            but whitespace (only markup) is embedded as it is instead.

    Attributes:
        source: the decoded document.
        text: the clean rendering (``source`` itself when there is no edit).

    Raises:
        ExpansionError: the edits would make a rendering longer than
            :func:`~ingestd.chunkers.readers.expansion.expansion_limit` of the
            document's length allows (found before it is built).
    """

    __slots__ = ("_ca", "_cb", "_ta", "_tb", "source", "text")

    def __init__(self, source: str, edits: list[Edit], body: int = 0) -> None:
        self.source = self.text = source
        self._ta: list[int] = []
        self._tb: list[int] = []
        self._ca: list[int] = []
        self._cb: list[int] = []
        merged = _whole_lines(source, _merge(edits)) if edits else []
        if not merged:
            return
        self._ta = ta = [a for a, _, _ in merged]
        self._tb = tb = [b for _, b, _ in merged]
        repl = [r for _, _, r in merged]
        lens = list(map(len, repl))
        after = [0, *tb[:-1]]  # where the kept text before each edit starts
        # clean offsets: kept characters and replacements up to the edit's end, its start
        self._cb = list(accumulate(map(add, map(sub, ta, after), lens)))
        self._ca = list(map(sub, self._cb, lens))
        size = len(source) + self._cb[-1] - tb[-1]  # the rendering's length, not yet built
        OutputBudget(len(source), "markup rendering").check(size)
        parts = [source[p:a] + r for p, a, r in zip(after, ta, repl, strict=True)]
        parts.append(source[tb[-1] :])
        self.text = "".join(parts)
        if not self.text[self.clean_at(body) :].strip():  # only markup: embed it as it is
            self.__init__(source, [])  # type: ignore[misc]

    @property
    def identity(self) -> bool:
        """Whether the rendering is the document itself."""
        return not self._ta

    def clean_at(self, p: int) -> int:
        """Offset in :attr:`text` of the first rendered character at or after ``source[p]``."""
        k = bisect.bisect_right(self._ta, p) - 1
        if k < 0:
            return p
        if p < self._tb[k]:
            return self._ca[k] if p == self._ta[k] else self._cb[k]
        return self._cb[k] + p - self._tb[k]

    def source_at(self, c: int) -> int:
        """Offset in :attr:`source` of ``text[c]`` (of the edit that produced it)."""
        k = bisect.bisect_right(self._cb, c) - 1
        if k + 1 < len(self._ca) and self._ca[k + 1] <= c:  # inside a replacement
            return self._ta[k + 1]
        return c if k < 0 else self._tb[k] + c - self._cb[k]

    def source_end(self, c: int) -> int:
        """Offset in :attr:`source` just after ``text[c - 1]`` (``c > 0``)."""
        k = bisect.bisect_right(self._cb, c - 1) - 1
        if k + 1 < len(self._ca) and self._ca[k + 1] <= c - 1:  # inside a replacement
            return self._tb[k + 1]
        return c if k < 0 else self._tb[k] + c - self._cb[k]

    def sections(self, sections: list[Section]) -> list[Section]:
        """``sections`` in offsets of :attr:`text`; blocks that render to nothing go.

        The blocks must be trimmed (``end`` after their last non-whitespace character)
        and not yet glued; ``next`` is linked again. Offsets are mapped in one pass
        (they increase), as :meth:`clean_at` maps one.
        """
        if self.identity:
            return sections
        text = self.text
        ta, tb, ca, cb = self._ta, self._tb, self._ca, self._cb
        n_edits = len(ta)
        k = 0  # edits that start at or before the offset being mapped

        def at(p: int) -> int:
            nonlocal k
            while k < n_edits and ta[k] <= p:
                k += 1
            j = k - 1
            if j < 0:
                return p
            if p < tb[j]:
                return ca[j] if p == ta[j] else cb[j]
            return cb[j] + p - tb[j]

        out: list[Section] = []
        flat: list[Block] = []
        for sec in sections:
            blocks: list[Block] = []
            for b in sec.blocks:
                s = at(b.start)
                body = at(b.body) if b.body > b.start else -1
                e = at(b.end)
                if s < e and text[s].isspace():
                    s = self._line_of_content(s, e)
                while e > s and text[e - 1].isspace():
                    e -= 1
                if e <= s:
                    continue
                if body < 0:
                    body = s
                elif body < e and text[body].isspace():
                    body = self._line_of_content(body, e)
                blocks.append(Block(s, e, e, b.kind, min(max(body, s), e)))
            flat.extend(blocks)
            out.append(Section(sec.path, sec.level, blocks))
        for i, blk in enumerate(flat):
            blk.next = flat[i + 1].start if i + 1 < len(flat) else len(text)
        return out

    def _line_of_content(self, c: int, end: int) -> int:
        """Start of the first line at or after ``c`` (a line start) with content before ``end``."""
        text = self.text
        q = c
        while q < end and text[q].isspace():
            q += 1
        return c if q >= end else text.rfind("\n", c, q) + 1 or c

    def place(self, spans: list[tuple[int, int]], body: int = 0) -> list[tuple[int, int]]:
        """Document spans of rendered ``spans`` (in order), tiling the document body.

        A span that starts a rendered line starts its document line; each span ends
        after the last non-whitespace document character before the next span
        (anything left out in between is its own); the first one starts at the first
        non-whitespace character at or after ``body``.
        """
        if self.identity or not spans:
            return spans
        src, text = self.source, self.text
        starts = []
        for cs, _ in spans:
            ts = self.source_at(cs)
            if cs == 0 or text[cs - 1] == "\n":
                ts = src.rfind("\n", 0, ts) + 1
            starts.append(ts)
        first = body
        while first < starts[0] and src[first].isspace():
            first += 1
        starts[0] = min(starts[0], first)
        out = []
        for k, (_, ce) in enumerate(spans):
            te = self.source_end(ce)
            nxt = starts[k + 1] if k + 1 < len(spans) else len(src)
            te += len(src[te:nxt].rstrip())
            out.append((starts[k], te))
        return out


def _merge(edits: list[Edit]) -> list[Edit]:
    """Sorted edits with overlapping or touching ones merged (a space if one had one).

    Two touching edits of which one puts text in (a character reference's character)
    keep both replacements, in order.
    """
    edits.sort()
    out: list[Edit] = []
    for a, b, r in edits:
        if a >= b and not r:
            continue
        if out and a <= out[-1][1]:
            pa, pb, pr = out[-1]
            if a == pb and (pr.strip() or r.strip()):  # touching: both replacements, in order
                out[-1] = (pa, b, pr + r)
            else:
                out[-1] = (pa, max(pb, b), " " if " " in (pr, r) else "")
        else:
            out.append((a, b, r))
    return out


def _whole_lines(src: str, edits: list[Edit]) -> list[Edit]:
    """``edits`` plus the whole-line edits of the lines they leave blank, merged.

    Only a line that starts with an edit (after its indent), or where an edit that
    crosses a line end stops, can be left blank; each such line is checked once.
    """
    starts = [a for a, _, _ in edits]
    extra: list[Edit] = []
    checked: set[int] = set()
    n = len(src)
    for a, b, _ in edits:
        # kept text right before or after the edit (merged edits never touch): the
        # line stays
        if (a > 0 and src[a - 1] not in " \t\n") or (b < n and src[b] not in " \t\n"):
            ls = -1
        else:
            ls = src.rfind("\n", 0, a) + 1
        if ls >= 0 and ls not in checked and not src[ls:a].strip(" \t"):
            checked.add(ls)
            if (cut := _blank_line(src, ls, edits, starts)) is not None:
                extra.append(cut)
        if src.find("\n", a, b - 1) != -1:  # it runs into a later line: that line too
            lt = src.rfind("\n", a, b - 1) + 1
            if lt not in checked:
                checked.add(lt)
                if (cut := _blank_line(src, lt, edits, starts)) is not None:
                    extra.append(cut)
    return _newlines(src, _merge(edits + extra) if extra else edits)


def _blank_line(src: str, ls: int, edits: list[Edit], starts: list[int]) -> Edit | None:
    """The edit that leaves out line ``ls`` with its newline, if ``edits`` blank it."""
    le = src.find("\n", ls)
    le = len(src) if le == -1 else le
    k = max(0, bisect.bisect_right(starts, ls) - 1)
    pos = ls
    while k < len(edits) and edits[k][0] <= le:
        a, b, r = edits[k]
        if b > pos:
            if a > pos and src[pos:a].strip():
                return None
            if r.strip() and a >= ls:
                return None
            pos = b
        k += 1
    if pos < le and src[pos:le].strip():
        return None
    return ls, min(le + 1, len(src)), ""


def _newlines(src: str, edits: list[Edit]) -> list[Edit]:
    """An edit over a line end keeps one newline when it starts mid-line, else none."""
    out = []
    for a, b, r in edits:
        if src.find("\n", a, b) != -1:
            r = "\n" if a > 0 and src[a - 1] != "\n" else ""
        out.append((a, b, r))
    return out
