"""Damaged state files: telling them apart from other failures, and naming them.

The state dir holds three parts: the manifest (``manifest.db``), the embedded vector
store (``qdrant/``) and the embedding cache (``embeddings.db``). A part whose file is
damaged (not a database, a malformed page, unreadable point records) raises
:class:`StateDamagedError`, which names the file; the command line turns it into one
line with the command that rebuilds the part from the others.

SQLite reports damage as a plain ``sqlite3.DatabaseError`` with the result codes
``SQLITE_CORRUPT`` or ``SQLITE_NOTADB`` (https://www.sqlite.org/rescode.html); its
subclasses (``OperationalError``: locked, disk full, ...) are other failures.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from ingestd.chunkers.errors import StateError

__all__ = ["StateDamagedError", "StoreLostError", "is_disk_full", "is_sqlite_damage"]

_DAMAGE_CODES = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})
_DAMAGE_WORDS = ("file is not a database", "malformed", "file is encrypted")


class StateDamagedError(StateError, RuntimeError):
    """A part of the state is damaged.

    Args:
        path: the damaged file or folder.
        part: ``"manifest"``, ``"vector store"`` or ``"embedding cache"``.
        detail: what was wrong with it (the underlying error).
    """

    def __init__(self, path: str | Path, part: str, detail: str) -> None:
        self.path = Path(path)
        self.part = part
        self.detail = detail
        super().__init__(f"the {part} {self.path} is damaged ({detail})")


class StoreLostError(StateError, RuntimeError):
    """The vector store holds fewer points than the manifest records: it lost data.

    A deleted store folder or collection folder, an alias naming a missing version, a
    deleted segment, a cut id tracker. Nothing is wrong with the files that remain, so
    no rebuild is needed: ``ingestd resync`` writes the lost points again (their
    vectors from the embedding cache).

    Args:
        collection: the collection that lost points.
        held: points the store holds; ``None`` when they are unknown because its files
            changed since ingestd last closed it cleanly (``detail`` says how).
        recorded: committed points the manifest records.
        state_dir: the state dir, named in the command that repairs it.
        detail: what changed in the store's files (with ``held`` ``None``).
    """

    def __init__(
        self,
        collection: str,
        held: int | None,
        recorded: int,
        state_dir: Path | None,
        detail: str | None = None,
    ) -> None:
        self.collection = collection
        self.held = held
        self.recorded = recorded
        fix = "ingestd resync" + (f" --state-dir {state_dir}" if state_dir is not None else "")
        if held is None:
            message = (
                f"the vector store's files of collection {collection} changed since ingestd "
                f"last closed it ({detail}): points of the {recorded:,} the manifest records "
                f"may be lost; `{fix}` checks every point and writes lost ones again"
            )
        else:
            message = (
                f"the vector store holds {held:,} of the {recorded:,} points the manifest "
                f"records for collection {collection} (its files were deleted or damaged); "
                f"`{fix}` writes them again"
            )
        super().__init__(message)


def is_sqlite_damage(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or the DB-API error it wraps) reports a damaged SQLite file."""
    orig = getattr(exc, "orig", None)
    if orig is not None:  # a SQLAlchemy error
        exc = orig
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = getattr(exc, "sqlite_errorname", None)
    if name is not None:
        return name in _DAMAGE_CODES
    return type(exc) is sqlite3.DatabaseError and any(w in str(exc) for w in _DAMAGE_WORDS)


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an error it wraps or was raised from) says the disk is full."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        orig = getattr(exc, "orig", None)
        if isinstance(orig, sqlite3.Error):
            exc = orig
        if isinstance(exc, sqlite3.Error):
            name = getattr(exc, "sqlite_errorname", None)
            if name == "SQLITE_FULL" or "database or disk is full" in str(exc):
                return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False
