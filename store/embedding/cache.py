"""The embedding cache, and the embedder that consults it before the model.

Vectors are cached in ``embeddings.db`` (SQLite), keyed by (model fingerprint, chunk
hash), bounded in entries and evicted least-recently-used. The cache outlives the
points it served, so a rename, a copy, a reverted edit or a branch switch and back is
never embedded again. :class:`CachedEmbedder` asks the cache first, then a fallback
(e.g. vectors of existing points), then the model (see :mod:`ingestd.store.embedding.embedder`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ingestd.store.embedding.model import Vectors

__all__ = ["CachedEmbedder", "EmbedStats", "EmbeddingCache"]


class EmbeddingCache:
    """Vectors by (model fingerprint, chunk hash) in a SQLite file, bounded, LRU.

    Args:
        path: the database file (``embeddings.db`` in the state dir), or ``":memory:"``.
        max_entries: most vectors kept; the least recently used are evicted past it
            (default 500,000: about 800 MB for 384-dim vectors).

    Thread-safe (one connection guarded by a lock).
    """

    def __init__(self, path: str | Path, max_entries: int = 500_000) -> None:
        self.path = str(path)
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, hash TEXT NOT NULL, "
            "dim INTEGER NOT NULL, vector BLOB NOT NULL, used INTEGER NOT NULL, "
            "PRIMARY KEY (model, hash))"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS ix_vectors_used ON vectors (used)")
        self._tick = int(
            self._db.execute("SELECT coalesce(max(used), 0) FROM vectors").fetchone()[0]
        )

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, Any]:
        """Cached vectors of ``hashes`` (hash -> float32 array); misses are absent."""
        out: dict[str, Any] = {}
        uniq = list(dict.fromkeys(hashes))
        with self._lock:
            self._tick += 1
            for i in range(0, len(uniq), 500):
                part = uniq[i : i + 500]
                q = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN ({q})",
                    [model, *part],
                ).fetchall()
                for h, blob in rows:
                    out[h] = np.frombuffer(blob, dtype=np.float32)
                if rows:
                    hit = [h for h, _ in rows]
                    self._db.execute(
                        "UPDATE vectors SET used = ? WHERE model = ? AND hash IN "
                        f"({','.join('?' * len(hit))})",
                        [self._tick, model, *hit],
                    )
        return out

    def cached(self, model: str, hashes: Sequence[str]) -> set[str]:
        """The hashes among ``hashes`` that have a vector of ``model``.

        A read only: unlike :meth:`get_many` it does not count as a use.
        """
        out: set[str] = set()
        uniq = list(dict.fromkeys(hashes))
        with self._lock:
            for i in range(0, len(uniq), 500):
                part = uniq[i : i + 500]
                q = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT hash FROM vectors WHERE model = ? AND hash IN ({q})", [model, *part]
                ).fetchall()
                out.update(h for (h,) in rows)
        return out

    def put_many(self, model: str, items: dict[str, Any]) -> None:
        """Store vectors (hash -> array), then evict past ``max_entries``."""
        if not items:
            return
        with self._lock:
            self._tick += 1
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (model, hash, dim, vector, used) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        model,
                        h,
                        int(v.shape[0]),
                        np.asarray(v, dtype=np.float32).tobytes(),
                        self._tick,
                    )
                    for h, v in items.items()
                ],
            )
            self._db.execute("COMMIT")
            n = self._db.execute("SELECT count(*) FROM vectors").fetchone()[0]
            if n > self.max_entries:
                self._db.execute(
                    "DELETE FROM vectors WHERE rowid IN "
                    "(SELECT rowid FROM vectors ORDER BY used LIMIT ?)",
                    (n - self.max_entries,),
                )

    def rekey(self, old: str, new: str) -> int:
        """File the vectors of model fingerprint ``old`` under ``new`` (the same vectors).

        A vector already under ``new`` for a hash is kept, the old one dropped.

        Returns:
            The vectors moved.
        """
        with self._lock:
            self._db.execute("BEGIN")
            moved = self._db.execute(
                "UPDATE OR IGNORE vectors SET model = ? WHERE model = ?", (new, old)
            ).rowcount
            self._db.execute("DELETE FROM vectors WHERE model = ?", (old,))
            self._db.execute("COMMIT")
        return int(moved)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


@dataclass
class EmbedStats:
    """Counters since start: vectors computed by the model and vectors reused."""

    embedded: int = 0
    reused: int = 0


class CachedEmbedder:
    """Vectors for chunk texts: from the cache when known, else from the model.

    Args:
        model: embedding callable (texts -> ``(n, dim)`` unit vectors).
        fingerprint: the model fingerprint (cache key part).
        cache: the embedding cache, or ``None``.
        hasher: chunk hash of a text (must match the store's chunk hashes).
        max_texts_per_call: most texts given to ``model`` in one call (``None``: all),
            so that whoever wraps ``model`` sees progress often.
        seconds_per_call: when calls of ``max_texts_per_call`` texts take longer than
            this (a loaded machine), later calls get fewer texts, so that one call
            stays about this long; they grow back when the model is faster again.
    """

    def __init__(
        self,
        model: Callable[[Sequence[str]], Vectors],
        fingerprint: str,
        cache: EmbeddingCache | None,
        hasher: Callable[[str], str],
        *,
        max_texts_per_call: int | None = None,
        seconds_per_call: float | None = None,
    ) -> None:
        self.model = model
        self.fingerprint = fingerprint
        self.cache = cache
        self.hasher = hasher
        self.max_texts_per_call = max_texts_per_call
        self.seconds_per_call = seconds_per_call
        # the first call is small (its speed is unknown); calls double up to the maximum
        self._per_call = (
            max(1, max_texts_per_call // 4)
            if max_texts_per_call and seconds_per_call
            else max_texts_per_call
        )
        self.stats = EmbedStats()

    def vectors(
        self,
        items: Sequence[tuple[str, str]],
        fallback: Callable[[list[str]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Vectors for ``(chunk_hash, text)`` pairs, as a dict hash -> vector.

        Lookup order: the cache, then ``fallback`` (e.g. vectors of existing points with
        the same chunk hash, read from the store), then the model. New vectors are put
        in the cache.
        """
        want = dict(items)
        found = self.cache.get_many(self.fingerprint, list(want)) if self.cache is not None else {}
        missing = [h for h in want if h not in found]
        if missing and fallback is not None:
            extra = fallback(missing)
            if extra:
                found.update(extra)
                if self.cache is not None:
                    self.cache.put_many(self.fingerprint, extra)
                missing = [h for h in missing if h not in found]
        self.stats.reused += len(want) - len(missing)
        i = 0
        while i < len(missing):
            part = missing[i : i + (self._per_call or len(missing))]
            i += len(part)
            t0 = time.monotonic()
            vecs = self.model([want[h] for h in part])
            self._adapt(len(part), time.monotonic() - t0)
            new = {h: vecs[k] for k, h in enumerate(part)}
            self.stats.embedded += len(part)
            if self.cache is not None:
                self.cache.put_many(self.fingerprint, new)
            found.update(new)
        return {h: found[h] for h in want}

    @property
    def texts_per_call(self) -> int | None:
        """Texts the next model call gets (``None``: all): about ``seconds_per_call`` of work."""
        return self._per_call

    def _adapt(self, n: int, seconds: float) -> None:
        """Size the next call to take about ``seconds_per_call`` at the rate just seen.

        A call within the target grows the size (at most doubling it); a slower one
        shrinks it. A small call (fewer texts were missing) that was quick leaves it.
        """
        top = self.max_texts_per_call
        if top is None or self.seconds_per_call is None or seconds <= 0:
            return
        fits = int(n * self.seconds_per_call / seconds)
        now = self._per_call or top
        if seconds <= self.seconds_per_call:
            self._per_call = max(now, min(top, fits, 2 * n))
        else:
            self._per_call = max(1, min(now, fits))

    def embed_texts(self, texts: Sequence[str]) -> Vectors:
        """Embed arbitrary texts through the cache (for the semantic chunker).

        Each text is embedded on its own batch position deterministically: the cache
        guarantees a text always maps to the same vector once computed.
        """
        pairs = [(self.hasher(t), t) for t in texts]
        got = self.vectors(pairs)
        if not pairs:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([got[h] for h, _ in pairs])
