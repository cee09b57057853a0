"""A vector store belongs to one state dir: recorded in the store, checked when it opens.

The manifest and the store describe each other; two state dirs whose configs point at
the same store (``qdrant.edge_path``, ``qdrant.path``) would each adopt the other's
points as their own, search each other's documents, and a ``forget`` in one would
delete the other's points. Running both at once is refused by the store's locks; one
after the other is refused here.

Ownership is an identity, not a folder that must be present: each state dir holds a
random id (:data:`ID_FILE`, made the first time it claims a store), and an embedded
store records its owner's id in a small file in its folder (:data:`OWNER_FILE`, with
the owner's last path, for the messages). A store that records another id is refused,
in one line, whatever this state dir can see: the owner may be renamed, on an
unmounted disk or on another machine. Only an explicit ``ingestd takeover``
(:func:`take_over`) makes it another state dir's. A state dir that is renamed or moved
keeps its id, so it keeps its store.

A *copy* of a state dir holds the same id. Started elsewhere against the original's
store, it was taken for the owner: two manifests then wrote one store in turn, each
adopting or deleting the other's points, the harm ownership exists to prevent. A copy
is told from a move by the original still being there: the store's record names the
owner's last path, and when that folder still holds this id under another path, this
state dir is a copy (:func:`copy_of`) and is refused like any other state dir. A copy
keeps a store that lies inside it (it was copied with it, and the original's is its
own). ``ingestd takeover`` by a copy gives it an id of its own first, so the original
is refused from then on, not the two of them taken for one.

A store that records no owner (made before ownership was recorded) is claimed by the
first state dir that opens it. A store recorded by path only (by an earlier version) is
its state dir's when the path is this state dir's or the store lies inside it.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from ingestd.chunkers.errors import StateError

__all__ = [
    "ID_FILE",
    "OWNER_FILE",
    "StoreOwnedError",
    "claim_store",
    "copy_of",
    "owner_problem",
    "owner_record",
    "state_id",
    "take_over",
]

#: The file in an embedded store's folder that names the state dir it belongs to.
OWNER_FILE = "ingestd-owner.json"
#: The file in a state dir that holds its random id (32 hex digits).
ID_FILE = "ingestd-id"


class StoreOwnedError(StateError, RuntimeError):
    """The store belongs to another state dir (two state dirs never share a store)."""


def _write_private(path: Path, data: bytes) -> None:
    """Write ``path`` whole (a temporary file renamed over it), mode 0600."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def state_id(state_dir: Path, *, create: bool = False) -> str | None:
    """The random id of ``state_dir`` (``None``: it has none and ``create`` is false).

    Args:
        state_dir: a state dir.
        create: make the id when there is none (``secrets.token_hex(16)``).
    """
    path = Path(state_dir) / ID_FILE
    try:
        text = path.read_text(encoding="ascii").strip()
        if text:
            return text
    except (OSError, UnicodeDecodeError):
        pass
    if not create:
        return None
    new = secrets.token_hex(16)
    _write_private(path, (new + "\n").encode())
    return new


def owner_record(folder: Path) -> dict[str, Any] | None:
    """What the store in ``folder`` records about its owner (``None``: nothing readable).

    Returns:
        ``{"owner": id or None, "state_dir": the owner's last path or None}``.
    """
    try:
        data = json.loads((folder / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    owner, path = data.get("owner"), data.get("state_dir")
    if not isinstance(owner, str) and not isinstance(path, str):
        return None
    return {
        "owner": owner if isinstance(owner, str) else None,
        "state_dir": path if isinstance(path, str) else None,
    }


def _describe(record: dict[str, Any]) -> str:
    where = record.get("state_dir")
    who = f"state dir {where}" if where else "another state dir"
    if where and not Path(where).is_dir():
        who += " (not there now: renamed, moved or on a disk not mounted)"
    if record.get("owner"):
        who += f", id {str(record['owner'])[:8]}"
    return who


def copy_of(record: dict[str, Any] | None, state_dir: Path) -> Path | None:
    """The state dir ``state_dir`` is a copy of, by a store's owner ``record``, or ``None``.

    It is one when the record names another folder as the owner's last path and that
    folder is still there holding the same id (a moved state dir leaves nothing behind).
    """
    if record is None or record["owner"] is None or not record["state_dir"]:
        return None
    other = Path(record["state_dir"])
    if str(other) == os.path.realpath(state_dir) or not other.is_dir():
        return None
    mine = state_id(state_dir)
    return other if mine is not None and state_id(other) == mine else None


def owner_problem(folder: Path, state_dir: Path) -> StoreOwnedError | None:
    """Why ``state_dir`` may not use the store in ``folder``, or ``None`` (reads files only).

    Args:
        folder: an embedded store's folder (it may not exist yet).
        state_dir: the state dir that wants it.
    """
    record = owner_record(folder)
    if record is None:
        return None
    mine = Path(os.path.realpath(state_dir))
    inside = Path(os.path.realpath(folder)).is_relative_to(mine)
    original = copy_of(record, state_dir)
    if record["owner"] is not None:
        if record["owner"] == state_id(state_dir) and (original is None or inside):
            return None
    elif record["state_dir"] == str(mine) or inside:
        return None  # recorded by path by an earlier version: this one's, or moved with it
    copied = f" (a copy of that state dir: same id {state_id(state_dir)!s:.8})" if original else ""
    return StoreOwnedError(
        f"the vector store {folder} belongs to {_describe(record)}{copied}; state dir {mine} "
        "may not "
        "use it (two state dirs never share a store): give this one its own store "
        "(qdrant.edge_path or qdrant.path), use the state dir that owns it, or make it "
        f"this one's with `ingestd takeover --state-dir {mine}`"
    )


def claim_store(folder: Path, state_dir: Path) -> None:
    """Check that ``state_dir`` may use the store in ``folder``, then record it as the owner.

    The state dir's id is made on its first claim; the owner's path is brought up to
    date when the state dir was renamed or moved.

    Raises:
        StoreOwnedError: another state dir owns it.
    """
    problem = owner_problem(folder, state_dir)
    if problem is not None:
        raise problem
    if not folder.is_dir():
        return
    mine = str(Path(os.path.realpath(state_dir)))
    record = owner_record(folder)
    me = state_id(state_dir, create=True)
    if record == {"owner": me, "state_dir": mine}:
        return
    _write_private(folder / OWNER_FILE, json.dumps({"owner": me, "state_dir": mine}).encode())


def take_over(folder: Path, state_dir: Path) -> dict[str, Any] | None:
    """Make the store in ``folder`` ``state_dir``'s, whoever owned it; the earlier record.

    Its points become this state dir's; the state dir that owned it is refused from
    then on. A copy of the owner (:func:`copy_of`) first gets an id of its own. The
    caller has said so to the user and has the store's lock (no process uses the store).
    """
    before = owner_record(folder)
    if copy_of(before, state_dir) is not None:  # a copy: its own id, or both would own it
        _write_private(Path(state_dir) / ID_FILE, (secrets.token_hex(16) + "\n").encode())
    me = state_id(state_dir, create=True)
    mine = str(Path(os.path.realpath(state_dir)))
    _write_private(folder / OWNER_FILE, json.dumps({"owner": me, "state_dir": mine}).encode())
    return before
