"""A store that lost acknowledged updates is found and healed, not counted and trusted.

A Qdrant Edge shard keeps recent writes in its write-ahead log until it flushes its
segments. A crash followed by a cut of that log (a torn write, a disk fault) loses the
last operations while every point stays: the pending markers the commit step removes,
the ``doc_hash`` and offsets a payload update writes. Counting points finds nothing;
before, 32 points of 9 documents stayed hidden from search and an appended file's
unchanged chunks kept their old ``doc_hash``, through restarts and every ``resync``.

Now the first check of a collection by a process compares every point's pending marker
and written payload fields with the manifest
(:func:`~ingestd.daemon.sync.healing.repair.check_store`, ``deep``) and repairs what
differs; the kill matrix over a real ``ingestd run`` with the
log cut after the kill ends, after the documented recovery, equal to a from-scratch
ingest.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingestd.store.search.query import PENDING_KEY
from tests.helpers import (
    assert_matches_oracle,
    fake_vectors,
    ingested_tree,
    make_engine,
    store_folder,
)

pytestmark = pytest.mark.engine("edge")  # what is checked is the Edge write-ahead log


def cut_wal(store: Path) -> list[str]:
    """Cut every write-ahead-log segment of every shard under ``store`` to half its data.

    Segments are preallocated (32 MiB of zeros after the records): the cut falls in
    the middle of what was written, as a torn write leaves it. Returns the files cut.
    """
    cut = []
    for seg in sorted(store.glob("collections/*/wal/*")):
        if not seg.name.startswith(("open-", "closed-")):
            continue
        data = seg.read_bytes()
        used = len(data.rstrip(b"\0"))
        if used > 16:
            with seg.open("r+b") as f:
                f.truncate(max(16, used // 2))
            cut.append(seg.name)
    return cut


def _tamper(state: Path, n: int) -> tuple[list[str], list[str]]:
    """What a torn log leaves: ``n`` committed points hidden, ``n`` with a stale ``doc_hash``."""
    from tests.helpers import open_state_store

    store = open_state_store(state)
    try:
        ids = sorted(store.point_ids("ingestd"))
        hidden, stale = ids[:n], ids[n : 2 * n]
        store.set_payload("ingestd", [(pid, {PENDING_KEY: True}) for pid in hidden])
        store.set_payload(
            "ingestd", [(pid, {"doc_hash": "0" * 64, "ordinal": 999}) for pid in stale]
        )
    finally:
        store.close()
    return hidden, stale


def test_lost_payload_updates_and_pending_markers_are_found_and_repaired(tmp_path: Path) -> None:
    root, state = ingested_tree(tmp_path)
    hidden, stale = _tamper(state, 5)
    eng = make_engine(root, state, fake_vectors)
    try:
        name = next(iter(eng.context.sources))
        assert eng.check_store(name, deep=False).repairs() == {}  # the counts agree
        plan = eng.plan(name)  # the first scan of this process: the deep check
        assert plan.repaired == {"stale": 5, "unhidden": 5}, plan.repaired
        assert eng.verify(name).clean
        again = eng.plan(name)
        assert not again.repaired  # once checked, the counts suffice
    finally:
        eng.close()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
    eng = make_engine(root, state, fake_vectors)
    try:  # the hidden points are found by search again
        hits = eng.resources.store.search(
            "ingestd", dense=fake_vectors(["x"])[0], sparse=None, limit=1000, mode="dense"
        )
        assert set(hidden) <= {h.id for h in hits}
    finally:
        eng.close()


def test_an_append_after_a_log_cut_on_a_closed_shard_ends_right(tmp_path: Path) -> None:
    """Cut the log of a cleanly closed shard, append to a file, restart: all is right."""
    root, state = ingested_tree(tmp_path)
    assert cut_wal(store_folder(state)) or True  # a flushed shard may have little left
    page = root / "docs/concepts/glossary.md"
    page.write_text(page.read_text() + "\n\nA paragraph appended after the cut.\n")
    for _ in range(2):  # the append, then a restart that checks the store again
        eng = make_engine(root, state, fake_vectors)
        try:
            name = next(iter(eng.context.sources))
            eng.sync(name)
            assert eng.verify(name).clean
        finally:
            eng.close()
        assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_the_cut_helper_cuts_inside_the_records(tmp_path: Path) -> None:
    seg = tmp_path / "collections/c/wal/open-1"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(b"wal" + b"x" * 997 + b"\0" * 4000)
    assert cut_wal(tmp_path) == ["open-1"]
    assert os.path.getsize(seg) == 500


def test_a_torn_log_is_found_from_the_files_and_its_shard_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ingestd.store.vectors.edge.edge_wal import wal_behind

    root, state = ingested_tree(tmp_path)
    (shard,) = (store_folder(state) / "collections").iterdir()
    assert wal_behind(shard) is None
    assert cut_wal(store_folder(state))
    last, version = wal_behind(shard) or (0, 0)
    assert last < version, "the cut log ends before the segments"
    eng = make_engine(root, state, fake_vectors)
    try:
        name = next(iter(eng.context.sources))
        assert eng.plan(name).empty
    finally:
        eng.close()
    assert "a torn log" in caplog.text and "rebuilt from its" in caplog.text
    assert wal_behind(shard) is None
    assert [p.name.split("-")[0] for p in (store_folder(state) / "damaged").iterdir()] == [
        shard.name.split("-")[0]
    ]
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_a_healthy_shard_is_never_taken_for_torn(tmp_path: Path) -> None:
    """Edits, moves, deletions and restarts: the log always reaches the segments."""
    from ingestd.store.vectors.edge.edge_wal import wal_behind

    root, state = ingested_tree(tmp_path)
    pages = sorted(p for p in root.rglob("*.md"))
    for i, page in enumerate(pages):
        if i % 3 == 0:
            page.write_text(page.read_text() + f"\n\nEdit number {i}.\n")
        elif i % 3 == 1:
            page.rename(page.with_name("moved-" + page.name))
        else:
            page.unlink()
        eng = make_engine(root, state, fake_vectors)
        try:
            eng.sync(next(iter(eng.context.sources)))
        finally:
            eng.close()
        for shard in (store_folder(state) / "collections").iterdir():
            assert wal_behind(shard) is None, (i, shard)
    assert not (store_folder(state) / "damaged").exists()
