"""A clean close is recorded: the next process reads no payload unless something may be torn.

Before, the first store check of every process compared every point's payload with
the manifest (an engine whose write-ahead log can lose acknowledged updates, Qdrant
Edge, cannot be trusted by a count), so a no-op ``resync`` read the whole collection:
7,808 payloads at 7.8k points, a million at a million. Now a writer records what proves
its clean close (:mod:`ingestd.daemon.sync.state.clean_close`), and the point-by-point check
runs only after an unclean end, a change of the store's or the manifest's files since
that close, or pending rows.

Payload reads are counted through the engine seam: each engine's spec opens the store
(:data:`ingestd.store.vectors.engines.ENGINES`), and the counting spec wraps it. Both
engines whose updates are not durable run: Qdrant Edge, and the test-only ``memory``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.sync.state.clean_close import RECORD_FILE, check_record, read_record
from tests.faults.test_torn_wal import cut_wal
from tests.helpers import (
    assert_matches_oracle,
    fake_vectors,
    ingested_tree,
    make_engine,
    store_folder,
)

NOT_DURABLE = pytest.mark.parametrize("qdrant_engine", ["edge", "memory"], indirect=True)


class PayloadReads:
    """Counts the payloads read by the scrolls of every store the engine's spec opens."""

    def __init__(self) -> None:
        self.payloads = 0
        self.opened = 0


@pytest.fixture
def reads(qdrant_engine: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[PayloadReads]:
    from ingestd.store.vectors.engines import engine_spec

    spec = engine_spec(qdrant_engine)
    counter = PayloadReads()
    real_open = spec.open

    def counting_open(path: Path, **kw: Any) -> Any:
        store = real_open(path, **kw)
        counter.opened += 1
        scroll = store.scroll

        def counting_scroll(*a: Any, **k: Any) -> Iterator[tuple[str, dict[str, Any]]]:
            for point in scroll(*a, **k):
                counter.payloads += 1
                yield point

        store.scroll = counting_scroll
        return store

    monkeypatch.setattr(spec, "open", counting_open)
    yield counter


def _resync(root: Path, state: Path) -> Any:
    """A no-op ``resync`` in this process: plan and apply, then close."""
    eng = make_engine(root, state, fake_vectors)
    try:
        name = next(iter(eng.context.sources))
        plan = eng.plan(name)
        assert plan.empty, plan
        return eng.check_store(name, deep=None).deep, eng.resources.store_open
    finally:
        eng.close()


@NOT_DURABLE
def test_a_clean_stop_then_a_no_op_resync_reads_no_payload(
    tmp_path: Path, reads: PayloadReads
) -> None:
    root, state = ingested_tree(tmp_path)
    assert (state / RECORD_FILE).is_file()
    reads.payloads = reads.opened = 0
    deep, opened = _resync(root, state)
    assert (deep, opened) == (False, False)
    assert (reads.payloads, reads.opened) == (0, 0)  # the store was not even opened
    # without the record (a killed process), the same resync reads every point once
    (state / RECORD_FILE).unlink()
    _resync(root, state)
    assert reads.payloads == 100 and reads.opened == 1
    _resync(root, state)  # that close was clean again
    assert reads.payloads == 100


@NOT_DURABLE
def test_a_writer_removes_the_record_first_and_only_a_clean_close_writes_it(
    tmp_path: Path, reads: PayloadReads
) -> None:
    root, state = ingested_tree(tmp_path)
    eng = make_engine(root, state, fake_vectors)
    name = next(iter(eng.context.sources))
    assert not (state / RECORD_FILE).exists()  # gone before anything was written
    page = root / "docs/concepts/glossary.md"
    page.write_text(page.read_text() + "\n\nAn edit before the crash.\n")
    eng.sync(name)
    # the process dies: its store and manifest go without a clean close
    store = eng.resources._store
    assert store is not None
    store.close()
    eng.resources.manifest.close()
    assert not (state / RECORD_FILE).exists()
    reads.payloads = 0
    eng = make_engine(root, state, fake_vectors)
    try:
        assert eng.check_store(name).deep and reads.payloads > 0
    finally:
        eng.close()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


@pytest.mark.engine("edge")
def test_a_log_cut_after_the_close_is_seen_and_checked_point_by_point(
    tmp_path: Path, reads: PayloadReads, caplog: pytest.LogCaptureFixture
) -> None:
    root, state = ingested_tree(tmp_path)
    page = root / "docs/concepts/glossary.md"
    page.write_text(page.read_text() + "\n\nAn edit that the log records.\n")
    eng = make_engine(root, state, fake_vectors)
    try:
        eng.sync(next(iter(eng.context.sources)))
    finally:
        eng.close()
    assert cut_wal(store_folder(state))
    proven = check_record(read_record(state), state / "manifest.db", {"edge": store_folder(state)})
    (change,) = proven.changed.values()
    assert "write-ahead log ends at entry" in change and not proven.held
    reads.payloads = 0
    deep, _ = _resync(root, state)
    assert deep is False and reads.payloads == 100  # checked (then the counts suffice)
    assert "changed since ingestd last closed it" in caplog.text
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


@NOT_DURABLE
def test_a_manifest_written_since_the_close_is_checked_point_by_point(
    tmp_path: Path, reads: PayloadReads
) -> None:
    root, state = ingested_tree(tmp_path)
    with sqlite3.connect(state / "manifest.db") as conn:  # another process (a restore)
        conn.execute("UPDATE sources SET last_sync = 0")
    reads.payloads = 0
    _resync(root, state)
    assert reads.payloads == 100


@pytest.mark.engine("edge")
def test_a_readers_search_leaves_the_record_proven(tmp_path: Path, reads: PayloadReads) -> None:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    root, state = ingested_tree(tmp_path)
    record = (state / RECORD_FILE).read_bytes()
    reader = Engine(
        load_config(None, roots=[root]), state, embed_model=fake_vectors, read_only=True
    )
    try:
        hits = reader.resources.store.search(
            "ingestd", dense=fake_vectors(["x"])[0], sparse=None, limit=5, mode="dense"
        )
        assert len(hits) == 5
    finally:
        reader.close()
    assert (state / RECORD_FILE).read_bytes() == record
    proven = check_record(read_record(state), state / "manifest.db", {"edge": store_folder(state)})
    assert proven.manifest_unchanged and not proven.changed and len(proven.held) == 1
    reads.payloads = reads.opened = 0
    assert _resync(root, state) == (False, False)


@pytest.mark.engine("edge")
def test_the_record_names_each_shards_log_end_and_points(tmp_path: Path) -> None:
    _root, state = ingested_tree(tmp_path)
    data = json.loads((state / RECORD_FILE).read_text())
    (sealed,) = data["stores"]["edge"]["collections"].values()
    assert sealed["points"] == 100
    last, crc = sealed["proof"]["wal"]
    assert last >= 0 and crc and sealed["proof"]["version"] == last
    assert all(sizes for sizes in sealed["proof"]["segments"].values())


@NOT_DURABLE
def test_status_after_a_clean_close_counts_nothing(tmp_path: Path, reads: PayloadReads) -> None:
    """Its counts come from the record: not one query over the chunk or document rows."""
    from ingestd.daemon.commands.status import local_status
    from ingestd.daemon.sync.healing.holdings import check_state
    from ingestd.store.manifest.view import ManifestView

    _root, state = ingested_tree(tmp_path)
    reads.opened = reads.payloads = 0
    with ManifestView(state / "manifest.db") as view:
        queries: list[str] = []
        execute = view._execute

        def spy(sql: str, params: tuple[Any, ...] = ()) -> Any:
            queries.append(sql)
            return execute(sql, params)

        view._execute = spy  # type: ignore[method-assign]
        st = local_status(view, state)
        assert check_state(None, state, view) == []
    assert st["sources"][0]["chunks"] == 100
    assert not [q for q in queries if "chunks" in q], queries
    assert not [q for q in queries if "documents" in q], queries  # none failed: none listed
    assert (reads.opened, reads.payloads) == (0, 0)


@pytest.mark.engine("edge")
def test_a_store_that_fails_to_close_is_not_recorded_as_closed_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from ingestd.store.vectors.edge.edge_guard import Guarded

    root, state = ingested_tree(tmp_path)
    eng = make_engine(root, state, fake_vectors)
    assert eng.resources.store.point_count("ingestd") == 100  # its shard is open

    def flush(self: Guarded) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(Guarded, "flush", flush, raising=False)
    eng.close()
    assert "did not close cleanly: No space left on device" in caplog.text
    assert not (state / RECORD_FILE).exists()  # the next start checks every point


@NOT_DURABLE
def test_a_daemon_after_a_clean_stop_loads_no_collection_before_it_is_ready(
    tmp_path: Path, qdrant_engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its collections load in the first job that uses them, not before ``READY=1``."""
    from ingestd.store.vectors.engines import engine_spec

    root, state = ingested_tree(tmp_path)
    spec = engine_spec(qdrant_engine)
    counted: list[str] = []
    opened = spec.open

    def counting_open(path: Path, **kw: Any) -> Any:
        store = opened(path, **kw)
        point_count = store.point_count

        def count(collection: str, *a: Any, **k: Any) -> int:
            counted.append(collection)
            return int(point_count(collection, *a, **k))

        store.point_count = count
        return store

    monkeypatch.setattr(spec, "open", counting_open)
    for unclean in (False, True):
        if unclean:
            (state / RECORD_FILE).unlink()  # a killed daemon left none
        eng = make_engine(root, state, fake_vectors)
        try:
            eng.open_collections()  # what ``ingestd run`` does before READY=1
            assert eng.resources.store_open
            assert counted == (["ingestd"] if unclean else [])
        finally:
            eng.close()
