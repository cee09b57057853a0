"""Freed memory goes back to the system after each sync that wrote something.

glibc's allocator keeps the memory a process frees in its heaps (arenas) for later
allocations, and gives back to the system only the free space at the *top* of a heap.
Embedding allocates and frees tensors of a new shape with every batch (the sequence
length follows the text), interleaved with long-lived Python objects, so the free
space ends up scattered between live blocks and is never at the top: under
``ingestd run`` with files rewritten once a second, the free bytes glibc held grew by
about 1 MB per edit (``mallinfo2().fordblks``: 131 MB -> 211 MB in 100 edits with the
real model, while the bytes in use grew by 12 MB), and RSS with them.

:func:`release_free_memory` calls glibc's ``malloc_trim(0)``, which returns every
whole free page of every arena to the system (``madvise(MADV_DONTNEED)``, glibc
>= 2.8; see ``man 3 malloc_trim``); the engine calls it after each outermost sync
that indexed or deleted documents. It takes a few milliseconds, against the hundreds
an embedding batch takes. On other C libraries it does nothing.

Before that it forgets the per-process word tables (the chunkers' piece and word
counts, BM25's stems and term ids): bounded, but kept full by a daemon that reads ever
new tokens (ids, numbers), about 1 MB more per 100 edits in ``bench/soak.py``. They
live for one sync: a resync still counts each word once, and an idle daemon holds
none of them.

Native memory that no trim gives back is bounded where it is made: torch's oneDNN
kernels are not cached per input shape (``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` in
:mod:`ingestd.store.embedding.embedder`), and the embedded store is reopened once it holds many
deleted points (``COMPACT_MIN_DELETED`` in :mod:`ingestd.store.vectors.client.qdrant`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform
from collections.abc import Callable

from ingestd.chunkers.sizing.spans import clear_word_tables as clear_chunker_tables
from ingestd.store.search.sparse import clear_word_tables as clear_sparse_tables

__all__ = ["release_free_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The ``malloc_trim`` function of glibc, or ``None`` on another C library."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):  # pragma: no cover - glibc always has it
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def release_free_memory() -> bool:
    """Forget the per-process word tables, then give the C heap's free pages back.

    The second part is glibc's ``malloc_trim(0)``; other C libraries skip it.

    Returns:
        Whether any memory was given back to the system (``False`` also when the C
        library is not glibc).
    """
    clear_chunker_tables()
    clear_sparse_tables()
    trim = _malloc_trim()
    if trim is None:
        return False
    return bool(trim(0))
