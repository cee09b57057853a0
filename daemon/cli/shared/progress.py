"""Progress bars on a terminal for the long commands: ``resync``, ``migrate``, ``eval``.

Bars are drawn (by tqdm, imported only then) when a person watches: stderr is a
terminal and the process does not run under systemd's journal. Each bar shows what a
sync has done: documents, chunks embedded and the time left at the rate so far.

This module imports nothing beyond the standard library: the command line imports it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingestd.daemon.sync.types import SyncProgress

__all__ = ["ShowBar", "duration", "interactive", "progress_bars", "sync_detail", "sync_progress"]

#: ``show(key, description, done, total, detail)``: create or update the bar of ``key``.
ShowBar = Callable[[Hashable, str, int, int, str], None]


def interactive() -> bool:
    """Whether a person watches stderr: it is a terminal and not journald's stream."""
    return sys.stderr.isatty() and not os.environ.get("JOURNAL_STREAM")


def duration(seconds: float) -> str:
    """``seconds`` rounded to whole seconds, as ``1h02m``, ``3m05s`` or ``42s``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def sync_detail(p: SyncProgress) -> str:
    """A sync's progress in words: documents done, chunks embedded, time left.

    ``"loading embedding model... 0/12 documents, 0 chunks embedded"`` while the
    model loads; else ``"3/12 documents, 40 chunks embedded, 1m05s left"`` (the time
    left from :meth:`~ingestd.daemon.sync.types.SyncProgress.eta_seconds`, once known).
    """
    detail = f"{p.docs_done}/{p.docs_total} documents, {p.chunks_embedded} chunks embedded"
    eta = p.eta_seconds()
    if p.phase != "indexing":
        detail = f"{p.phase}... " + detail
    elif eta is not None:
        detail += f", {duration(eta)} left"
    return detail


@contextlib.contextmanager
def progress_bars() -> Iterator[ShowBar]:
    """Bars, one per key, drawn on stderr while the block runs and removed when it ends.

    On stderr, the stream :func:`interactive` checks: stdout stays the command's output.

    Yields:
        ``show(key, description, done, total, detail)``: creates the bar of ``key``
        or updates it; ``done`` and ``total`` are in one unit (bytes, searches), a
        ``total`` below 1 counts as 1 and a ``done`` past it as ``total``.
    """
    from tqdm import tqdm

    bars: dict[Hashable, Any] = {}

    def show(key: Hashable, description: str, done: int, total: int, detail: str) -> None:
        bar = bars.get(key)
        if bar is None:
            bar = bars[key] = tqdm(
                total=max(1, total),
                desc=description,
                position=len(bars),
                leave=False,
                file=sys.stderr,
                dynamic_ncols=True,
                bar_format="{desc} {bar} {percentage:3.0f}%{postfix}",
            )
        bar.total = max(1, total)
        bar.n = min(done, bar.total)  # past the total is a full bar, as tqdm draws none
        bar.set_description_str(description, refresh=False)
        bar.set_postfix_str(detail)  # redraws the bar: it always shows the last call

    try:
        yield show
    finally:
        for bar in reversed(bars.values()):
            bar.close()


@contextlib.contextmanager
def sync_progress(quiet: bool) -> Iterator[Callable[[SyncProgress], None] | None]:
    """A progress bar on an interactive terminal; nothing under systemd or pipes.

    One line per source: documents done, chunks embedded, and the time left at the
    rate so far (:func:`sync_detail`); "loading embedding model" while the model loads.

    Args:
        quiet: no bar (the command's output is JSON).

    Yields:
        The ``progress`` callback of a sync, or ``None`` when no bar is drawn.
    """
    if quiet or not interactive():
        yield None
        return
    with progress_bars() as show:

        def update(p: SyncProgress) -> None:
            name = Path(p.source).name or p.source
            show(p.source, f"indexing {name}", p.bytes_done, p.bytes_total, sync_detail(p))

        yield update
