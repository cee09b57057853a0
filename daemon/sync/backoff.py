"""Exponential back-off per key, with one log line per change of state.

A file that cannot be read (permission denied, locked, vanished mid-read) is tried
again later, never treated as deleted. Tried every second, one such file fills the
journal; so each failure doubles the delay up to a cap, and the owner logs only when a
key changes state (readable -> unreadable, another error, unreadable -> readable).

:class:`Backoff` is pure bookkeeping: the clock is an argument of every call (after
watchfiles' and watchdog's practice of keeping timing out of state), so tests step
it without sleeping.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["Backoff", "Failing"]

K = TypeVar("K", bound=Hashable)


@dataclass
class Failing:
    """A key that failed and waits for its next try.

    Attributes:
        error: the last error, one line.
        attempts: consecutive failures so far (1 after the first).
        since: when the first of them happened (clock seconds).
        next_at: when the key is due for its next try (clock seconds).
    """

    error: str
    attempts: int
    since: float
    next_at: float

    def as_dict(self, now: float) -> dict[str, Any]:
        """JSON-ready fields, with ``retry_in_seconds`` from ``now``."""
        return {
            "error": self.error,
            "attempts": self.attempts,
            "failing_for_seconds": round(max(0.0, now - self.since), 1),
            "retry_in_seconds": round(max(0.0, self.next_at - now), 1),
        }


class Backoff(Generic[K]):
    """Consecutive failures per key; the delay doubles from ``initial`` up to ``cap``.

    Args:
        initial: delay after the first failure, in seconds.
        cap: longest delay, in seconds.
        factor: growth of the delay per failure.

    Raises:
        ValueError: ``initial`` is not positive or ``cap`` is below it.
    """

    def __init__(self, initial: float, cap: float, factor: float = 2.0) -> None:
        if initial <= 0 or cap < initial or factor < 1:
            raise ValueError(f"invalid back-off: initial={initial}, cap={cap}, factor={factor}")
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self._failing: dict[K, Failing] = {}

    def delay(self, attempts: int) -> float:
        """Seconds to wait after the ``attempts``-th consecutive failure (1-based)."""
        exp = min(max(attempts - 1, 0), 64)  # 2**64 * initial is far past any cap
        return float(min(self.cap, self.initial * self.factor**exp))

    def failed(self, key: K, error: str, now: float) -> bool:
        """Record a failure of ``key`` at ``now``.

        Returns:
            Whether its state changed: the first failure, or an error unlike the last
            one. Log then, not at every retry.
        """
        f = self._failing.get(key)
        if f is None:
            self._failing[key] = Failing(error, 1, now, now + self.delay(1))
            return True
        f.attempts += 1
        f.next_at = now + self.delay(f.attempts)
        changed = f.error != error
        f.error = error
        return changed

    def succeeded(self, key: K) -> Failing | None:
        """Forget ``key``; returns its record when it was failing (a change of state)."""
        return self._failing.pop(key, None)

    def get(self, key: K) -> Failing | None:
        """The record of ``key`` while it fails, else ``None``."""
        return self._failing.get(key)

    def due(self, now: float) -> list[K]:
        """Keys whose next try is due at ``now``."""
        return [k for k, f in self._failing.items() if f.next_at <= now]

    def next_at(self) -> float | None:
        """When the next key becomes due, or ``None`` when none fails."""
        return min((f.next_at for f in self._failing.values()), default=None)

    def items(self) -> list[tuple[K, Failing]]:
        """``(key, record)`` of every failing key."""
        return list(self._failing.items())

    def __contains__(self, key: object) -> bool:
        return key in self._failing

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._failing))

    def __len__(self) -> int:
        return len(self._failing)
