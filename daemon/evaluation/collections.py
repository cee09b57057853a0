"""The throw-away collections of ``ingestd eval``: their names, their ledger, their drop.

Run ``R`` (8 hex digits) indexes rule set ``i`` into the collection ``eval-R-i`` (an
alias over versioned physical collections, like every collection of the store). Each
name is written to the *ledger*, ``<state dir>/eval-collections``, before the collection
is created, and removed from it once the collection is dropped; so the collections of a
daemon killed mid-run are found and dropped by the next run (:meth:`EvalCollections.
drop_leftovers`). A name that is not an eval name, or that a source uses, is never
dropped.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Collection
from pathlib import Path

from ingestd.daemon.statedir import PRIVATE_FILE_MODE, StatePaths
from ingestd.store.vectors.base import VectorStore

__all__ = ["EVAL_PREFIX", "LEDGER", "EvalCollections", "collection_name"]

logger = logging.getLogger(__name__)

#: Prefix of every collection an evaluation creates.
EVAL_PREFIX = "eval-"
#: File in the state dir listing the eval collections that may exist.
LEDGER = StatePaths.EVAL_LEDGER
_NAME = re.compile(r"eval-([0-9a-f]{8})-\d+\Z")


def collection_name(run: str, index: int) -> str:
    """The collection of rule set ``index`` (0-based) of run ``run``."""
    return f"{EVAL_PREFIX}{run}-{index}"


class EvalCollections:
    """Eval collections in one vector store, listed in a ledger file.

    Args:
        store: the vector store.
        ledger: the ledger file; ``None`` for a scratch store that dies with the run.
    """

    def __init__(self, store: VectorStore, ledger: Path | None) -> None:
        self.store = store
        self.ledger = ledger

    def register(self, name: str) -> None:
        """List ``name`` in the ledger; call it before the collection is created."""
        names = self.listed()
        if name not in names:
            self._write([*names, name])

    def drop(self, name: str) -> bool:
        """Drop collection ``name`` (its alias and every version), then unlist it.

        Returns:
            Whether it is gone; a failure is logged and the name stays listed, so a
            later run tries again.
        """
        try:
            physical = set(self.store.versions(name).values())
            lay = self.store.layout(name)
            if lay.physical is not None:
                physical.add(lay.physical)
            for p in sorted(physical):
                self.store.drop_collection(p)
        except Exception:
            logger.warning("could not drop eval collection %s", name, exc_info=True)
            return False
        self._unlist(name)
        return True

    def drop_leftovers(self, *, used: Collection[str], running: Collection[str]) -> list[str]:
        """Drop the listed collections of runs that did not finish.

        Args:
            used: collection names of sources: never dropped (only unlisted).
            running: ids of runs in flight: their collections are left alone.

        Returns:
            The names dropped.
        """
        dropped = []
        for name in self.listed():
            m = _NAME.match(name)
            if m is None or name in used:
                self._unlist(name)
            elif m.group(1) not in running:
                logger.info("dropping %s, left by an evaluation that did not finish", name)
                if self.drop(name):
                    dropped.append(name)
        return dropped

    def listed(self) -> list[str]:
        """The names in the ledger, in the order they were listed."""
        if self.ledger is None:
            return []
        try:
            return [n for n in self.ledger.read_text().split() if n]
        except FileNotFoundError:
            return []

    def _unlist(self, name: str) -> None:
        names = self.listed()
        if name in names:
            names.remove(name)
            self._write(names)

    def _write(self, names: list[str]) -> None:
        if self.ledger is None:
            return
        tmp = self.ledger.with_name(self.ledger.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
        with os.fdopen(fd, "w") as f:
            f.write("".join(n + "\n" for n in names))
        os.replace(tmp, self.ledger)
