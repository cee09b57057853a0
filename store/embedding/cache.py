"""The embedding cache, and the embedder that consults it before the model.

Vectors are cached in ``embeddings.db`` (SQLite), keyed by (model fingerprint, chunk
hash), bounded in entries and evicted least-recently-used. The cache outlives the
points it served, so a rename, a copy, a reverted edit or a branch switch and back is
never embedded again. :class:`CachedEmbedder` asks the cache first, then a fallback
(e.g. vectors of existing points), then the model (see :mod:`ingestd.store.embedding.embedder`),
in calls of a bounded size; a call the missing texts leave part-empty is filled with
texts the caller will ask for next (``ahead``), whose vectors wait in the cache, so that
the calls stay full while work remains (a request to an embedding server costs about the
same for one text as for a batch).

No vector with NaN, infinity or no length is cached, written or served from the cache
(:mod:`ingestd.store.embedding.finite`): the model's answers are checked (a bad one is
asked again), and a bad vector read back from the cache or the store is a miss.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ingestd.store.embedding.finite import (
    ATTEMPTS,
    NonFiniteVectorError,
    bad_rows,
    count_rejected,
    is_usable,
)
from ingestd.store.embedding.model import Vectors

__all__ = ["AHEAD_MEMORY", "CachedEmbedder", "EmbedStats", "EmbeddingCache"]

#: Most hashes of texts embedded ahead (to fill a call) that :class:`CachedEmbedder`
#: remembers until they are asked for: those are counted as embedded, not as reused.
AHEAD_MEMORY = 4096


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
        """Cached vectors of ``hashes`` (hash -> float32 array); misses are absent.

        A cached vector that is not finite or has no length (cached by a version that
        did not check) is a miss, and is dropped from the cache.
        """
        out: dict[str, Any] = {}
        bad: list[str] = []
        uniq = list(dict.fromkeys(hashes))
        with self._lock:
            self._tick += 1
            for rows in self._stored(model, uniq):
                for h, blob in rows:
                    vec = np.frombuffer(blob, dtype=np.float32)
                    if is_usable(vec):
                        out[h] = vec
                    else:
                        bad.append(h)
                if rows:
                    hit = [h for h, _ in rows]
                    self._db.execute(
                        "UPDATE vectors SET used = ? WHERE model = ? AND hash IN "
                        f"({','.join('?' * len(hit))})",
                        [self._tick, model, *hit],
                    )
        if bad:
            count_rejected(len(bad))
            self.drop(model, bad)
        return out

    def unusable(self, model: str, hashes: Sequence[str]) -> list[str]:
        """The hashes among ``hashes`` whose cached vector is not finite or has no length.

        A read only (``verify``): nothing is dropped or counted as a use.
        """
        out: list[str] = []
        uniq = list(dict.fromkeys(hashes))
        with self._lock:
            for rows in self._stored(model, uniq):
                out += [h for h, blob in rows if not is_usable(np.frombuffer(blob, np.float32))]
        return sorted(out)

    def _stored(self, model: str, hashes: list[str]) -> Iterator[list[tuple[str, bytes]]]:
        """The ``(hash, vector blob)`` rows of ``hashes`` under ``model``, a batch at a time.

        500 hashes per query (under SQLite's bound-parameter limit); the caller holds
        ``self._lock``.
        """
        for i in range(0, len(hashes), 500):
            part = hashes[i : i + 500]
            q = ",".join("?" * len(part))
            yield self._db.execute(
                f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN ({q})",
                [model, *part],
            ).fetchall()

    def drop(self, model: str, hashes: Sequence[str]) -> None:
        """Forget the cached vectors of ``hashes`` (they are embedded again when needed)."""
        uniq = list(dict.fromkeys(hashes))
        with self._lock:
            for i in range(0, len(uniq), 500):
                part = uniq[i : i + 500]
                q = ",".join("?" * len(part))
                self._db.execute(
                    f"DELETE FROM vectors WHERE model = ? AND hash IN ({q})", [model, *part]
                )

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
        """Store vectors (hash -> array), then evict past ``max_entries``.

        A vector that is not finite or has no length is never stored (left out).
        """
        items = {h: v for h, v in items.items() if is_usable(v)}
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
    """Counters since start: vectors computed by the model and vectors reused.

    ``rejected``: vectors the model answered with NaN, infinity or no length (each
    asked again; none kept).
    """

    embedded: int = 0
    reused: int = 0
    rejected: int = 0


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
            ``None``: every call is ``max_texts_per_call`` texts (an embedding server,
            whose request size and concurrency are its configuration).
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
        self._ahead: dict[str, None] = {}  # hashes embedded ahead, not yet asked for

    def vectors(
        self,
        items: Sequence[tuple[str, str]],
        fallback: Callable[[list[str]], dict[str, Any]] | None = None,
        ahead: Sequence[tuple[str, str]] = (),
    ) -> dict[str, Any]:
        """Vectors for ``(chunk_hash, text)`` pairs, as a dict hash -> vector.

        Lookup order: the cache, then ``fallback`` (e.g. vectors of existing points with
        the same chunk hash, read from the store), then the model. New vectors are put
        in the cache.

        Args:
            items: the ``(chunk_hash, text)`` pairs wanted.
            fallback: vectors of hashes from elsewhere (hash -> vector; misses absent).
            ahead: ``(chunk_hash, text)`` pairs the caller will ask for next, in order.
                When the missing texts leave the last model call part-empty (fewer than
                :attr:`texts_per_call`), it is filled with those of them that neither
                the cache nor ``fallback`` holds; their vectors go to the cache only
                (not returned). Needs a cache (without one, nothing is embedded ahead).
        """
        want = dict(items)
        found = self.cache.get_many(self.fingerprint, list(want)) if self.cache is not None else {}
        missing = [h for h in want if h not in found]
        if missing and fallback is not None:
            extra = _usable(fallback(missing))
            if extra:
                found.update(extra)
                if self.cache is not None:
                    self.cache.put_many(self.fingerprint, extra)
                missing = [h for h in missing if h not in found]
        early = [h for h in want if h in found and h in self._ahead]  # embedded ahead
        for h in early:
            del self._ahead[h]
        self.stats.reused += len(want) - len(missing) - len(early)
        i = 0
        while i < len(missing):
            size = self._per_call or len(missing)
            part = missing[i : i + size]
            i += len(part)
            texts = [want[h] for h in part]
            if i >= len(missing) and len(part) < size and ahead:
                filler = self._filler(size - len(part), want, ahead, fallback)
                part += list(filler)
                texts += list(filler.values())
            t0 = time.monotonic()
            vecs = self._embed(texts)
            self._adapt(len(part), time.monotonic() - t0)
            new = {h: vecs[k] for k, h in enumerate(part)}
            self.stats.embedded += len(part)
            if self.cache is not None:
                self.cache.put_many(self.fingerprint, new)
            found.update((h, new[h]) for h in part if h in want)
            self._remember_ahead(h for h in part if h not in want)
        return {h: found[h] for h in want}

    def _filler(
        self,
        room: int,
        want: dict[str, str],
        ahead: Sequence[tuple[str, str]],
        fallback: Callable[[list[str]], dict[str, Any]] | None,
    ) -> dict[str, str]:
        """Up to ``room`` texts of ``ahead`` to embed now: not wanted, cached or in ``fallback``.

        Returns:
            hash -> text, in the order of ``ahead``.
        """
        if self.cache is None:
            return {}
        out: dict[str, str] = {}
        step = max(room, 16)
        for i in range(0, len(ahead), step):
            pairs = {h: t for h, t in ahead[i : i + step] if h not in want and h not in out}
            pairs = {h: t for h, t in pairs.items() if h not in self._ahead}
            held = self.cache.cached(self.fingerprint, list(pairs))
            todo = [h for h in pairs if h not in held]
            if todo and fallback is not None:
                extra = _usable(fallback(todo))
                if extra:
                    self.cache.put_many(self.fingerprint, extra)
                    todo = [h for h in todo if h not in extra]
            for h in todo[: room - len(out)]:
                out[h] = pairs[h]
            if len(out) >= room:
                break
        return out

    def _embed(self, texts: list[str]) -> Vectors:
        """The model's vectors of ``texts``, each finite and non-zero.

        A text whose vector is bad is given to the model again, alone with the other
        bad ones, up to :data:`~ingestd.store.embedding.finite.ATTEMPTS` calls in all.

        Raises:
            NonFiniteVectorError: a text's vector is still bad after the last attempt.
        """
        vecs = self.model(texts)
        bad = bad_rows(vecs)
        for _ in range(ATTEMPTS - 1):
            if not bad:
                return vecs
            self._reject(len(bad))
            vecs = np.array(vecs, dtype=np.float32)  # a writable copy
            again = self.model([texts[i] for i in bad])
            vecs[bad] = again
            bad = [bad[i] for i in bad_rows(again)]
        if bad:
            self._reject(len(bad))
            raise NonFiniteVectorError(
                f"the embedding model gave a vector with NaN, infinity or no length for "
                f"{len(bad)} of {len(texts)} text(s) on each of {ATTEMPTS} attempts "
                f"(first: {texts[bad[0]][:80]!r}); nothing of it is cached or written"
            )
        return vecs

    def _reject(self, n: int) -> None:
        self.stats.rejected += n
        count_rejected(n)

    def _remember_ahead(self, hashes: Any) -> None:
        for h in hashes:
            self._ahead[h] = None
        while len(self._ahead) > AHEAD_MEMORY:  # asked for by no one (a sync interrupted)
            del self._ahead[next(iter(self._ahead))]

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


def _usable(vectors: dict[str, Any] | None) -> dict[str, Any]:
    """``vectors`` (hash -> vector) without those that are not finite or have no length."""
    if not vectors:
        return {}
    keep = {h: v for h, v in vectors.items() if is_usable(v)}
    if len(keep) < len(vectors):
        count_rejected(len(vectors) - len(keep))
    return keep
