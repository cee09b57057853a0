"""A vector store belongs to one state dir: recorded in the store, checked when it opens.

The manifest and the store describe each other; two state dirs whose configs point at
the same store (``qdrant.edge_path``, ``qdrant.path``) would each adopt the other's
points as their own, search each other's documents, and a ``forget`` in one would
delete the other's points. Running both at once is refused by the store's locks; one
after the other was not. So an embedded store records its owner in a small file in its
folder (:data:`OWNER_FILE`: the owner's canonical state dir) and a store claimed by
another state dir that still exists is refused, in one line naming both.

A store that records no owner (made before this was recorded) is claimed by the first
state dir that opens it. A state dir that was moved or copied with its store inside it
takes the store along (the folder inside a state dir is that state dir's). A store whose
recorded owner is gone (its folder no longer exists) is claimed, with a warning.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ingestd.chunkers.errors import StateError

__all__ = ["OWNER_FILE", "StoreOwnedError", "claim_store", "owner_problem"]

logger = logging.getLogger(__name__)

#: The file in an embedded store's folder that names the state dir it belongs to.
OWNER_FILE = "ingestd-owner.json"


class StoreOwnedError(StateError, RuntimeError):
    """The store belongs to another state dir (two state dirs never share a store)."""


def _owner(folder: Path) -> Path | None:
    try:
        data = json.loads((folder / OWNER_FILE).read_text(encoding="utf-8"))
        return Path(str(data["state_dir"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def owner_problem(folder: Path, state_dir: Path) -> StoreOwnedError | None:
    """Why ``state_dir`` may not use the store in ``folder``, or ``None`` (files only).

    Args:
        folder: an embedded store's folder (it may not exist yet).
        state_dir: the state dir that wants it.
    """
    owner = _owner(folder)
    mine = Path(os.path.realpath(state_dir))
    if owner is None or owner == mine:
        return None
    if Path(os.path.realpath(folder)).is_relative_to(mine):
        return None  # inside this state dir: moved or copied with it
    if not owner.is_dir():
        return None  # its owner is gone
    return StoreOwnedError(
        f"the vector store {folder} belongs to state dir {owner}; state dir {mine} may not "
        "use it (two state dirs never share a store): give this one its own store "
        "(qdrant.edge_path or qdrant.path), or use the state dir that owns it"
    )


def claim_store(folder: Path, state_dir: Path) -> None:
    """Check that ``state_dir`` may use the store in ``folder``, then record it as the owner.

    Raises:
        StoreOwnedError: another state dir that still exists owns it.
    """
    problem = owner_problem(folder, state_dir)
    if problem is not None:
        raise problem
    mine = Path(os.path.realpath(state_dir))
    owner = _owner(folder)
    if owner == mine or not folder.is_dir():
        return
    if owner is not None:
        logger.warning(
            "vector store %s: its owner %s is gone or moved; now %s's", folder, owner, mine
        )
    tmp = folder / f".{OWNER_FILE}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps({"state_dir": str(mine)}).encode())
    finally:
        os.close(fd)
    os.replace(tmp, folder / OWNER_FILE)
