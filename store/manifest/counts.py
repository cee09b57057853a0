"""What each source holds, counted once and kept until a write changes it.

Counting a source's points is a join over every chunk row: at a million points it took
23 s here (distinct point ids over 1M rows), and every store check, ``status``, metric
scrape and no-op ``resync`` asked for it. So a manifest keeps each source's counts
(:data:`COUNT_KEYS`) in a :class:`CountCache`: computed on the first ask, dropped by
the writes that can change them (chunk rows added, committed or deleted, documents added,
deleted, or marked failed; a stat update is not one), and carried between processes by
the state dir's clean-close record (:mod:`ingestd.daemon.sync.state.clean_close`), which
holds them while the manifest's file is as that close left it. A write costs what it
changes: only the sources it touched are counted again.

The cache is shared by the threads of a daemon (its status is answered off the engine
thread): a count computed while a write of its source commits is not kept (each drop
bumps the source's generation).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

__all__ = ["COUNT_KEYS", "CountCache"]

#: The counts of a source: documents, committed and pending point ids, failed documents,
#: and indexed documents that lost chunks that are not prose (``partly_skipped``).
COUNT_KEYS = ("documents", "chunks", "pending", "failed", "partly_skipped")


class CountCache:
    """Each source's counts (:data:`COUNT_KEYS`), kept between the writes that change them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = {}
        self._generation: dict[str, int] = {}
        self._epoch = 0

    def get(self, source: str, count: Callable[[], dict[str, int]]) -> dict[str, int]:
        """The counts of ``source``: kept ones, else ``count()`` (kept unless a write came)."""
        with self._lock:
            kept = self._counts.get(source)
            if kept is not None:
                return dict(kept)
            seen = (self._epoch, self._generation.get(source, 0))
        value = count()
        with self._lock:
            if (self._epoch, self._generation.get(source, 0)) == seen:
                self._counts[source] = dict(value)
        return dict(value)

    def changed(self, sources: Iterable[str] | None) -> None:
        """Drop the counts of ``sources`` (``None``: of every source); call after the commit."""
        with self._lock:
            if sources is None:
                self._counts.clear()
                self._epoch += 1
                return
            for s in sources:
                self._counts.pop(s, None)
                self._generation[s] = self._generation.get(s, 0) + 1

    def seed(self, counts: Mapping[str, Mapping[str, int]]) -> None:
        """Take counts known to be current (a clean close's, with the manifest unchanged)."""
        with self._lock:
            for source, c in counts.items():
                if all(isinstance(c.get(k), int) for k in COUNT_KEYS):
                    self._counts.setdefault(source, {k: int(c[k]) for k in COUNT_KEYS})

    def known(self) -> dict[str, dict[str, int]]:
        """The counts kept now, by source."""
        with self._lock:
            return {s: dict(c) for s, c in self._counts.items()}
