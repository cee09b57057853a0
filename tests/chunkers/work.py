"""The work a chunker does, counted: characters its tokenizers and token indexes measure.

A wall-clock bound or ratio fails on a loaded machine; a count does not. Chunking
costs are dominated by measuring text: the sizers' counts and boundaries, and the
one-pass token index of a document (:class:`~ingestd.chunkers.sizing.spans.SpanIndex`,
its :class:`~ingestd.chunkers.sizing.pieces.PieceTable`). A chunker that measures the
rest of the text again for every chunk (the super-linear faults these tests were
written for) measures ``n`` characters ``n / chunk`` times. The time itself is
measured in ``bench/hostile.py``, as a ratio in one process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ingestd.chunkers.sizing.pieces import PieceTable, piece_table
from ingestd.chunkers.sizing.spans import SpanIndex

__all__ = ["Work", "counted", "linear_work"]

#: The sizer methods that measure text, each with the characters one call measures.
_MEASURES: dict[str, Callable[..., int]] = {
    "count": len,
    "count_exact": len,
    "encode": len,
    "boundaries": len,
    "ascii_counter": len,
    "count_many": lambda texts: _total(texts),
}


class Work:
    """Characters measured while :func:`counted` is active."""

    def __init__(self) -> None:
        self.chars = 0

    def wrap(self, fn: Callable[..., Any], size: Callable[..., int]) -> Callable[..., Any]:
        def counted(arg: Any, *args: Any, **kwargs: Any) -> Any:
            self.chars += size(arg)
            return fn(arg, *args, **kwargs)

        return counted


@contextmanager
def counted(mp: pytest.MonkeyPatch, *sizers: Any) -> Iterator[Work]:
    """Count the characters ``sizers`` and the token indexes measure, until exit.

    The sizers' measuring methods are wrapped on the instances (``isinstance`` checks
    and fast paths stay as they are); the piece tables are built again, from the
    wrapped sizers.
    """
    work = Work()
    piece_table.cache_clear()
    for sizer in sizers:
        for name, size in _MEASURES.items():
            fn = getattr(sizer, name, None)
            if callable(fn):
                mp.setattr(sizer, name, work.wrap(fn, size))
        pieces = getattr(sizer, "piece_counter", None)
        if callable(pieces):
            mp.setattr(sizer, "piece_counter", lambda p=pieces: _or_none(work, p()))
    mp.setattr(SpanIndex, "build", classmethod(_method(work, SpanIndex.build.__func__, len)))
    mp.setattr(PieceTable, "value", _method(work, PieceTable.value, len))
    mp.setattr(PieceTable, "exact", _method(work, PieceTable.exact, _total))
    try:
        yield work
    finally:
        piece_table.cache_clear()


def _total(texts: list[str]) -> int:
    return sum(map(len, texts))


def _or_none(work: Work, fn: Callable[[str], int] | None) -> Callable[[str], int] | None:
    return None if fn is None else work.wrap(fn, len)


def _method(work: Work, fn: Callable[..., Any], size: Callable[..., int]) -> Callable[..., Any]:
    def counted(self: Any, arg: Any, *args: Any, **kwargs: Any) -> Any:
        work.chars += size(arg)
        return fn(self, arg, *args, **kwargs)

    return counted


def linear_work(
    run: Callable[[int], Any],
    sizers: tuple[Any, ...],
    small: int,
    big: int,
    max_ratio: float = 2.0,
) -> Any:
    """Run ``run(small)`` then ``run(big)``; assert the work grew at most linearly.

    The work is the characters measured (see :func:`counted`). A linear chunker
    measures ``big / small`` times as much for the big text (10x for 100k -> 1M), a
    quadratic one ``(big / small) ** 2`` times (100x). ``max_ratio`` times the
    linear growth is allowed (a few chunks of the big text measured twice). Returns
    the big run's result.
    """
    with pytest.MonkeyPatch.context() as mp, counted(mp, *sizers) as work:
        run(small)
        w_small, work.chars = work.chars, 0
        out = run(big)
        w_big = work.chars
    growth = big / small
    assert w_small > 0, "nothing was measured: the counted methods are not the ones used"
    assert w_big <= max_ratio * growth * w_small, (
        f"{big} characters: {w_big:,} measured, {small}: {w_small:,}; "
        f"{w_big / w_small:.1f}x for {growth:.0f}x the text: super-linear"
    )
    return out
