"""A Qdrant Edge shard whose failures come out as ingestd's errors.

Calls into the engine (Rust, through pyo3) fail in two ways that must not look like
anything else: a panic (``pyo3_runtime.PanicException``, a ``BaseException`` that would
end the daemon) becomes :class:`EngineError`; an error that says a file of the shard
cannot be read as written becomes
:class:`~ingestd.store.common.damage.StateDamagedError`, naming the shard's folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ingestd.store.common.damage import StateDamagedError

__all__ = ["EngineError", "Guarded", "is_damage"]


class EngineError(RuntimeError):
    """The Qdrant Edge engine failed (a panic in its Rust code), with its message."""


#: Words of the engine's errors that say a file of the shard cannot be read as written
#: (a cut payload page: "Gridstore IO error: elements range ... is out of bounds").
_DAMAGE_WORDS = ("io error", "out of bounds", "corrupt", "checksum", "unexpected end")


def is_damage(exc: BaseException) -> bool:
    """Whether an error of a shard's operation says that its files are damaged."""
    text = str(exc).lower()
    return any(w in text for w in _DAMAGE_WORDS)


class Guarded:
    """An ``EdgeShard`` whose panics come out as :class:`EngineError`, damage as such.

    ``pyo3_runtime.PanicException`` is a ``BaseException``: one failed call must fail
    its document or its batch, never stop the daemon. An error that says a file of the
    shard cannot be read as written (:func:`is_damage`) is a
    :class:`~ingestd.store.common.damage.StateDamagedError` naming the shard's folder:
    retrying cannot help, ``resync --rebuild`` can.
    """

    def __init__(self, shard: Any, folder: Path) -> None:
        self._shard = shard
        self._folder = folder

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._shard, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except Exception as exc:
                if is_damage(exc):
                    raise StateDamagedError(self._folder, "vector store", f"{name}: {exc}") from exc
                raise
            except BaseException as exc:
                if type(exc).__name__ != "PanicException":
                    raise
                raise EngineError(f"the Qdrant Edge engine failed in {name}: {exc}") from None

        return call
