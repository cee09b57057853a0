"""A Qdrant Edge shard whose failures come out as ingestd's errors.

Calls into the engine (Rust, through pyo3) fail in two ways that must not look like
anything else: a panic (``pyo3_runtime.PanicException``, a ``BaseException`` that would
end the daemon) becomes :class:`EngineError`; an error that says a file of the shard
cannot be read as written becomes
:class:`~ingestd.store.common.damage.StateDamagedError`, naming the shard's folder.

A third way cannot be caught at all: the engine maps some files whole (Gridstore pages,
dense vector chunks), and a mapped file cut shorter than its mapping kills the process
that reads past its end with SIGBUS. :func:`mapped_damage` finds such a file from its
size and its storage's ``config.json`` before the engine maps it, and
:class:`MappedFiles` checks the files of a store in use in a few stats, which a daemon
does before each job.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ingestd.store.common.damage import StateDamagedError

__all__ = [
    "MAPPED_FILES",
    "EngineError",
    "Guarded",
    "MappedFiles",
    "is_damage",
    "mapped_damage",
    "mapped_files",
]

#: The files a storage maps whole, by the ``config.json`` key that gives their size in
#: bytes: Gridstore's pages (payloads, sparse vectors, payload indexes) and the chunks of
#: a chunked dense vector storage (Qdrant's ``lib/gridstore`` and
#: ``lib/segment/src/vector_storage/chunked_mmap_vectors.rs``).
MAPPED_FILES = {"page_size_bytes": "page_*.dat", "chunk_size_bytes": "chunk_*.mmap"}
#: Seconds a :class:`MappedFiles` list is used before the folders are listed again (new
#: segments and pages are checked from then on).
RELIST_S = 10.0


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


def mapped_files(shard: Path) -> list[tuple[Path, int, str]]:
    """Every file of ``shard`` the engine maps whole: ``(file, size it maps, config key)``.

    Reads the storages' ``config.json`` files (an unreadable one is left to the engine).
    """
    out: list[tuple[Path, int, str]] = []
    for config in sorted(shard.glob("segments/*/**/config.json")):
        try:
            data = json.loads(config.read_bytes())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        for key, pattern in MAPPED_FILES.items():
            size = data.get(key)
            if isinstance(size, int) and size > 0:
                out += [(f, size, key) for f in sorted(config.parent.glob(pattern))]
    return out


def _size_damage(files: list[tuple[Path, int, str]]) -> StateDamagedError | None:
    for file, size, key in files:
        try:
            have = file.stat().st_size
        except FileNotFoundError:
            continue  # a segment merged away since the list was made
        except OSError:
            continue
        if have != size:
            return StateDamagedError(
                file,
                "vector store",
                f"{have:,} bytes where the engine maps {size:,} ({key} of its storage)",
            )
    return None


def mapped_damage(shard: Path) -> StateDamagedError | None:
    """The first file of ``shard`` the engine maps whole that is not the size it maps.

    Opens nothing: a stat per file and a read of each storage's ``config.json``.
    """
    return _size_damage(mapped_files(shard))


class MappedFiles:
    """The files an Edge store maps whole, checked for their size in a few stats.

    The list of files is made again every :data:`RELIST_S` seconds; between two lists
    a check costs one ``stat`` per file.

    Args:
        folder: the Edge store's folder (its shards are ``collections/*``).
        clock: monotonic seconds.
    """

    def __init__(self, folder: Path, clock: Any = time.monotonic) -> None:
        self.folder = folder
        self.clock = clock
        self._files: list[tuple[Path, int, str]] = []
        self._listed = float("-inf")

    def damage(self) -> StateDamagedError | None:
        """The first mapped file cut or grown from the size the engine maps, or ``None``."""
        if self.clock() - self._listed >= RELIST_S:
            shards = sorted(self.folder.glob("collections/*"))
            self._files = [f for shard in shards for f in mapped_files(shard)]
            self._listed = self.clock()
        return _size_damage(self._files)
