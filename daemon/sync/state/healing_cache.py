"""The embedding cache, healed when its file is damaged: a cache never stops the daemon."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingestd.daemon.sync.state.damage import set_aside
from ingestd.store.common.damage import is_sqlite_damage

__all__ = ["HealingCache"]

logger = logging.getLogger(__name__)


class HealingCache:
    """An :class:`~ingestd.store.embedding.cache.EmbeddingCache` that survives damage to its file.

    A damaged file (at open or at any later read or write) is moved aside to
    ``embeddings.db.damaged-<time>`` with a warning, and an empty cache takes its
    place; the call that met the damage is answered as by an empty cache (a lookup
    finds nothing, a store is dropped). Vectors are only ever re-embedded.

    Args:
        path: the cache file.
        max_entries: most vectors kept (see ``EmbeddingCache``).
        open_cache: builds the underlying cache (tests inject faults).
    """

    def __init__(
        self, path: Path, max_entries: int, open_cache: Callable[[Path, int], Any] | None = None
    ) -> None:
        self.path = Path(path)
        self.max_entries = max_entries
        self._open = open_cache or _open_embedding_cache
        self._lock = threading.Lock()
        self._inner: Any = None
        self._inner = self._opened()

    def _opened(self) -> Any:
        try:
            return self._open(self.path, self.max_entries)
        except Exception as exc:
            if not is_sqlite_damage(exc):
                raise
            self._set_aside(exc)
            return self._open(self.path, self.max_entries)

    def _set_aside(self, exc: BaseException) -> None:
        if self._inner is not None:
            try:
                self._inner.close()
            except Exception:
                logger.debug("closing the damaged embedding cache failed", exc_info=True)
            self._inner = None
        moved = set_aside(self.path)
        logger.warning(
            "the embedding cache %s is damaged (%s); moved aside to %s and started empty "
            "(vectors are embedded again as needed)",
            self.path,
            exc,
            moved,
        )

    def _healing(self, name: str, *args: Any, empty: Any = None) -> Any:
        with self._lock:
            try:
                return getattr(self._inner, name)(*args)
            except Exception as exc:
                if not is_sqlite_damage(exc):
                    raise
                self._set_aside(exc)
                self._inner = self._opened()
                return empty

    def get_many(self, model: str, hashes: Any) -> dict[str, Any]:
        """See ``EmbeddingCache.get_many``; nothing is found in a damaged file."""
        out = self._healing("get_many", model, hashes, empty={})
        return dict(out)

    def put_many(self, model: str, items: dict[str, Any]) -> None:
        """See ``EmbeddingCache.put_many``; dropped when the file is damaged."""
        self._healing("put_many", model, items)

    def close(self) -> None:
        """Close the underlying cache."""
        if self._inner is not None:
            self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _open_embedding_cache(path: Path, max_entries: int) -> Any:
    from ingestd.store.embedding.cache import EmbeddingCache

    return EmbeddingCache(path, max_entries)
