"""How far ``read`` widens a hit within a token budget: its section first, then around it.

A hit is one chunk; :func:`widen` chooses the lines ``read`` returns for it when a
budget is given. It grows a run of the document's chunks from the hit, one chunk at a
time on each side in turn (the next one after it, then the one before it), first up to
the edges of the hit's section, then past them, and stops on each side at the first
chunk whose lines would take the text over the budget. The tokens are those of the
lines' text, counted with the index's budget tokenizer. A hit whose own lines do not
fit is cut to its first lines that do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["lines_within", "widen"]


def lines_within(
    lines: Sequence[str], first: int, last: int, budget: int, count: Callable[[str], int]
) -> int:
    """The last line, from ``first`` up to ``last``, that keeps the text within ``budget``.

    Args:
        lines: the file's lines (index 0 is line 1).
        first: the first line (1-based).
        last: the last line wanted (inclusive).
        budget: most tokens of the lines' text (joined by line ends).
        count: tokens of a text.

    Returns:
        The last line (inclusive; at least ``first``: one line is always given, even
        when it alone is over the budget).
    """
    lo, hi = first, max(first, min(last, len(lines)))
    while lo < hi:  # the largest end that fits
        mid = (lo + hi + 1) // 2
        if count("\n".join(lines[first - 1 : mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def widen(
    chunks: Sequence[tuple[str, dict[str, Any]]],
    hit: int,
    section: tuple[int, int],
    lines: Sequence[str],
    budget: int,
    count: Callable[[str], int],
) -> tuple[int, int]:
    """The lines ``read`` returns for ``chunks[hit]`` within ``budget`` tokens.

    Args:
        chunks: ``(id, payload)`` of the document's chunks around the hit, in order
            (payloads with ``start_line`` and ``end_line``).
        hit: the index of the hit in ``chunks``.
        section: the first and last index in ``chunks`` of the hit's section.
        lines: the file's lines now (index 0 is line 1).
        budget: most tokens of the lines' text.
        count: tokens of a text (the index's budget tokenizer).

    Returns:
        ``(first, last)`` lines, 1-based and inclusive.
    """

    def span(a: int, b: int) -> tuple[int, int]:
        return int(chunks[a][1]["start_line"]), int(chunks[b][1]["end_line"])

    def fits(a: int, b: int) -> bool:
        first, last = span(a, b)
        return count("\n".join(lines[first - 1 : last])) <= budget

    first, last = span(hit, hit)
    if not fits(hit, hit):
        return first, lines_within(lines, first, last, budget, count)
    lo = hi = hit
    for edge_lo, edge_hi in (section, (0, len(chunks) - 1)):
        grow_hi, grow_lo = True, True
        while grow_hi or grow_lo:
            if grow_hi:
                grow_hi = hi < edge_hi and fits(lo, hi + 1)
                hi += grow_hi
            if grow_lo:
                grow_lo = lo > edge_lo and fits(lo - 1, hi)
                lo -= grow_lo
        if not (lo == edge_lo and hi == edge_hi):  # the budget ended inside this zone
            break
    return span(lo, hi)
