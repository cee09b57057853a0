"""``ingestd`` with a fake embedder, as a real process (fault tests only).

``python -m tests.faults.fakecli ARGS...`` runs the ``ingestd`` command line with
every engine built on :func:`tests.helpers.fake_vectors` (deterministic unit vectors
from text hashes) instead of the model, so a test can run ``ingestd run`` and
``ingestd resync`` as processes, kill them, and pay neither the model's import nor its
embedding. Environment knobs:

* ``INGESTD_TEST_SLICE``: chunks per write slice (smaller: more checkpoints).
* ``INGESTD_TEST_EMBED_DELAY``: seconds each embedding call sleeps (a slower model,
  so kills land in the middle of writes).
* ``INGESTD_TEST_KILL_AFTER``: ``Class.method:N`` (``QdrantStore.upsert``,
  ``Manifest.commit_documents``, ...): the process kills itself with SIGKILL right
  after the N-th call of that write step.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(argv: Sequence[str]) -> None:
    """Run the command line with the fake embedder."""
    from ingestd.daemon import engine as engine_mod
    from ingestd.daemon.cli.main import main as cli_main
    from ingestd.daemon.sync.writing import writer as writer_mod
    from tests.helpers import fake_vectors

    delay = float(os.environ.get("INGESTD_TEST_EMBED_DELAY", "0"))
    if os.environ.get("INGESTD_TEST_SLICE"):
        writer_mod.SLICE_CHUNKS = int(os.environ["INGESTD_TEST_SLICE"])

    def embed(texts: Sequence[str]) -> Any:
        if delay:
            time.sleep(delay)
        return fake_vectors(texts)

    init = engine_mod.Engine.__init__

    def fake_init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("embed_model", embed)
        init(self, *args, **kwargs)

    engine_mod.Engine.__init__ = fake_init  # type: ignore[method-assign]
    if os.environ.get("INGESTD_TEST_KILL_AFTER"):
        _kill_after(os.environ["INGESTD_TEST_KILL_AFTER"])
    cli_main(argv)


def _kill_after(spec: str) -> None:
    """Make the process SIGKILL itself after the N-th call of ``Class.method``."""
    import signal

    from ingestd.store.manifest.manifest import Manifest
    from ingestd.store.vectors.client.qdrant import QdrantStore

    target, nth = spec.rsplit(":", 1)
    cls_name, method = target.split(".")
    cls: Any = {"Manifest": Manifest, "QdrantStore": QdrantStore}[cls_name]
    orig = getattr(cls, method)
    calls = [0]

    def wrapped(self: Any, *a: Any, **k: Any) -> Any:
        out = orig(self, *a, **k)
        calls[0] += 1
        if calls[0] == int(nth):
            os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(cls, method, wrapped)


if __name__ == "__main__":
    main(sys.argv[1:])
