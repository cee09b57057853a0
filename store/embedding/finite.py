"""Only finite, non-zero vectors are cached or written, whatever made them.

A model or a server can answer a vector holding NaN or infinity (an overflow, a
server's bug, a bit flipped in transit), or a zero vector. Normalising either gives a
vector of NaN, which a cosine index never ranks: its document is indexed but dense
search never finds it, and a cached copy would be served again after the store is
rebuilt. So every vector is checked before it goes anywhere:

* the ``openai`` backend checks each answer; a bad one is a failed request, tried again
  on the retry path of a server error (:mod:`ingestd.store.embedding.remote_backend`);
* :class:`~ingestd.store.embedding.cache.CachedEmbedder` checks what any backend
  returns, calls the model again for the rejected texts (:data:`ATTEMPTS` calls in
  all), and raises :class:`NonFiniteVectorError` if they stay bad: the document is
  recorded as failed, with the reason in ``status``, and nothing is cached or written;
* vectors read back from the cache or from existing points are checked too: a bad one
  is a miss (embedded again), and ``verify`` reports those already stored
  (``--repair`` embeds them again).

Every rejected vector is counted (:func:`rejected_total`, the
``ingestd_vectors_rejected`` metric).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ingestd.chunkers.errors import ModelError

__all__ = [
    "ATTEMPTS",
    "NonFiniteVectorError",
    "bad_rows",
    "count_rejected",
    "is_usable",
    "rejected_total",
]

#: Model calls for one text before its vector is given up as bad (the first and retries).
ATTEMPTS = 3

_lock = threading.Lock()
_rejected = 0


class NonFiniteVectorError(ModelError, ValueError):
    """The model gave a vector with NaN or infinity, or a zero vector, on every attempt."""


def bad_rows(vectors: Any) -> list[int]:
    """Rows of ``vectors`` that are not usable: a non-finite value, or a zero norm.

    Args:
        vectors: an ``(n, dim)`` array (any float dtype), as a model returns it.

    Returns:
        The indices of the bad rows, ascending (empty: all usable).
    """
    arr = np.asarray(vectors, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.size == 0:
        return []
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", arr, arr))
    ok = np.isfinite(arr).all(axis=1) & np.isfinite(norms) & (norms > 0)
    return [int(i) for i in np.flatnonzero(~ok)]


def is_usable(vector: Any) -> bool:
    """Whether one vector (``(dim,)``) is finite and non-zero."""
    return vector is not None and not bad_rows(vector)


def count_rejected(n: int) -> None:
    """Count ``n`` vectors rejected (thread-safe; see :func:`rejected_total`)."""
    global _rejected
    with _lock:
        _rejected += n


def rejected_total() -> int:
    """Vectors rejected as non-finite or zero in this process so far."""
    with _lock:
        return _rejected
