"""Relative folder paths with a fast "everything below this folder" query."""

from __future__ import annotations

import bisect
from typing import Generic, TypeVar

__all__ = ["PathIndex"]

V = TypeVar("V")


class PathIndex(Generic[V]):
    """Relative folder paths -> values, with every path below a folder in O(log n + k).

    Keys are also kept sorted: the paths below ``top`` are the contiguous range from
    ``top + "/"`` up to ``top + "0"`` (``"0"`` is the code point after ``"/"``).
    """

    def __init__(self) -> None:
        self._map: dict[str, V] = {}
        self._keys: list[str] = []

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __setitem__(self, key: str, value: V) -> None:
        if key not in self._map:
            bisect.insort(self._keys, key)
        self._map[key] = value

    def get(self, key: str) -> V | None:
        """The value of ``key``, or ``None``."""
        return self._map.get(key)

    def pop(self, key: str) -> V | None:
        """Remove ``key``; returns its value, or ``None`` when it was not there."""
        if key not in self._map:
            return None
        del self._keys[bisect.bisect_left(self._keys, key)]
        return self._map.pop(key)

    def under(self, top: str) -> list[str]:
        """``top`` (when present) and every key below it (``""``: every key)."""
        if not top:
            return list(self._keys)
        lo = bisect.bisect_left(self._keys, top + "/")
        hi = bisect.bisect_left(self._keys, top + "0", lo)
        return ([top] if top in self._map else []) + self._keys[lo:hi]

    def drop(self, top: str) -> None:
        """Remove ``top`` and every key below it."""
        for key in self.under(top):
            self.pop(key)

    def move(self, old: str, new: str) -> None:
        """Key ``old`` and the keys below it are now below ``new`` (a folder renamed)."""
        for key in self.under(old):
            value = self._map[key]
            self.pop(key)
            self[new + key[len(old) :]] = value

    def items(self) -> list[tuple[str, V]]:
        """``(key, value)`` pairs, keys in order."""
        return [(k, self._map[k]) for k in self._keys]
