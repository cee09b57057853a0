"""``last_change_synced``: when a change of a source's files last became searchable.

``last_sync`` is the end of the last *complete* sync; a sync that wrote documents but
left a file to retry (or a watched edit while the daemon runs) must still say when the
index last changed, in ``status`` with and without a daemon.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.commands.status import status_of
from ingestd.daemon.wire.protocol import request
from tests.daemon.harness import Harness
from tests.helpers import CountingEmbedder, fake_vectors, wait_for


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def _engine(root: Path, state: Path, clock: Clock) -> Any:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    return Engine(load_config(None, roots=[root]), state, embed_model=fake_vectors, now=clock)


def _source(eng: Any) -> dict[str, Any]:
    (src,) = status_of(eng.resources.manifest, eng, eng.resources.paths.root)["sources"]
    return src


def test_a_change_batch_records_when_it_was_written_and_a_noop_scan_does_not(
    tree: Path, tmp_path: Path
) -> None:
    clock = Clock()
    eng = _engine(tree, tmp_path / "state", clock)
    try:
        (name,) = eng.context.sources
        eng.sync(name)
        src = _source(eng)
        assert src["last_sync"] == src["last_change_synced"] == 1_000.0
        clock.t = 2_000.0
        assert eng.sync(name).complete  # nothing changed: in sync, nothing written
        src = _source(eng)
        assert (src["last_sync"], src["last_change_synced"]) == (2_000.0, 1_000.0)
        clock.t = 3_000.0
        page = tree / "docs/concepts/glossary.md"
        page.write_text(page.read_text() + "\n\nA brand new paragraph about zebras.\n")
        res = eng.sync(name, ["docs/concepts/glossary.md"])
        assert res.indexed == 1
        assert _source(eng)["last_change_synced"] == 3_000.0
    finally:
        eng.close()


def test_a_sync_left_incomplete_still_records_the_changes_it_wrote(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingestd.daemon.sync.types import UnreadableFile

    clock = Clock()
    eng = _engine(tree, tmp_path / "state", clock)
    prepare = eng.preparer.prepare_watched

    def locked_out(source: str, rel: str, *args: Any) -> Any:
        if rel == "locked.md":  # as a file locked by another program
            raise UnreadableFile("permission denied")
        return prepare(source, rel, *args)

    monkeypatch.setattr(eng.preparer, "prepare_watched", locked_out)
    try:
        (name,) = eng.context.sources
        eng.sync(name)
        clock.t = 5_000.0
        (tree / "new.md").write_text("# New\n\nA new page about otters.\n")
        (tree / "locked.md").write_text("# Locked\n\nCannot be read.\n")
        res = eng.sync(name, ["new.md", "locked.md"])
        assert res.indexed == 1 and res.retry == ["locked.md"] and not res.complete
        src = _source(eng)
        assert src["last_sync"] == 1_000.0  # not complete: a file is left to retry
        assert src["last_change_synced"] == 5_000.0
    finally:
        eng.close()


@pytest.mark.slow
def test_a_watched_edit_updates_the_daemon_status(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    with Harness(tree, scratch / "state", fake_embedder) as h:
        (before,) = request(h.state, "status", {}, timeout=10)["sources"]
        batches = h.service.batches_done
        edited = time.time()
        page = tree / "docs/collector/quick-start.md"
        page.write_text(page.read_text() + "\n\nEdited while watched.\n")
        h.settle(batches)

        def changed() -> Any:
            (src,) = request(h.state, "status", {}, timeout=10)["sources"]
            return src if (src["last_change_synced"] or 0) >= edited else None

        src = wait_for(changed, 30, "the edit's sync time in status")
        assert src["last_change_synced"] > before["last_change_synced"]
