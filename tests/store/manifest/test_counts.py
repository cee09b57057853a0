"""What each source holds is counted once and kept until a write of that source changes it.

Before, every ask counted a join over the source's chunk rows: 23 s for 1M points here
(``collection_counts``, asked twice by every store check, so by every no-op
``resync``, every metric scrape and every ``status``). Now the counts are kept between
the writes that change them, and a write counts again only the sources it touched.
The counts are compared with a fresh manifest's (a count in the database) after every
kind of write.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingestd.store.manifest.counts import CountCache
from ingestd.store.manifest.manifest import AdoptedDocument, ChunkRow, Manifest, sqlite_url

pytestmark = pytest.mark.engine("edge")  # the manifest alone: one run is enough


@pytest.fixture
def manifest(tmp_path: Path) -> Iterator[Manifest]:
    m = Manifest(sqlite_url(tmp_path / "manifest.db"), now=lambda: 1000.0)
    for s in ("a", "b"):
        m.ensure_source(s, f"/{s}", "ingestd")
        for d in range(3):
            doc = m.upsert_document(s, f"d{d}.md")
            m.commit_document(doc, _rows(s, d, 4))
    yield m
    m.close()


def _rows(source: str, doc: int, n: int) -> list[ChunkRow]:
    return [ChunkRow(f"{source}-{doc}-{i}", f"h{i}", i, i * 10, i * 10 + 9) for i in range(n)]


class Counted:
    """Counts the database counts of a manifest, per source."""

    def __init__(self, m: Manifest, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sources: list[str] = []
        real = m._count

        def count(source: str) -> dict[str, int]:
            self.sources.append(source)
            return real(source)

        monkeypatch.setattr(m, "_count", count)


def _fresh(m: Manifest, source: str) -> dict[str, int]:
    return m._count(source)


def test_counts_are_kept_until_a_write_of_their_source(
    manifest: Manifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(manifest, monkeypatch)
    assert manifest.collection_counts("ingestd") == (24, 0)
    assert sorted(counted.sources) == ["a", "b"]
    for _ in range(3):  # asked again: nothing counted
        manifest.collection_counts("ingestd")
        manifest.counts("a")
    assert len(counted.sources) == 2
    doc = manifest.document("a", "d0.md")
    assert doc is not None
    manifest.update_document(doc.id, size=123, mtime_ns=456)  # a stat update: no count changes
    manifest.counts("a")
    assert len(counted.sources) == 2
    manifest.add_pending(doc.id, _rows("a", 9, 2))  # a write of source a
    assert manifest.collection_counts("ingestd") == (24, 2)
    assert counted.sources[2:] == ["a"]  # b is not counted again


@pytest.mark.parametrize(
    "write",
    ["add_pending", "commit", "fail", "delete", "new_document", "adopt", "forget"],
)
def test_every_write_that_changes_a_count_drops_it(manifest: Manifest, write: str) -> None:
    manifest.counts("a")
    doc = manifest.document("a", "d1.md")
    assert doc is not None
    if write == "add_pending":
        manifest.add_pending_many({doc.id: _rows("a", 7, 3)})
    elif write == "commit":
        manifest.commit_document(doc.id, _rows("a", 1, 1))
    elif write == "fail":
        manifest.update_document(doc.id, state="failed", error="boom")
    elif write == "delete":
        manifest.delete_document(doc.id)
    elif write == "new_document":
        manifest.upsert_documents("a", ["new.md"])
    elif write == "adopt":
        manifest.adopt("a", {"adopted.md": AdoptedDocument("x", "fp", tuple(_rows("a", 8, 2)))})
    else:
        manifest.forget_source("a")
    assert manifest.counts("a") == _fresh(manifest, "a")
    assert manifest.counts("b") == _fresh(manifest, "b")


def test_a_count_computed_while_a_write_commits_is_not_kept() -> None:
    cache = CountCache()
    started, release = threading.Event(), threading.Event()

    def slow_count() -> dict[str, int]:  # reads the database before the write commits
        started.set()
        release.wait(30)
        return {"documents": 1, "chunks": 1, "pending": 0, "failed": 0}

    t = threading.Thread(target=lambda: cache.get("a", slow_count))
    t.start()
    started.wait(30)
    cache.changed(["a"])  # the write commits meanwhile
    release.set()
    t.join(30)
    assert cache.known() == {}
    fresh = {"documents": 2, "chunks": 2, "pending": 0, "failed": 0}
    assert cache.get("a", lambda: fresh) == fresh and cache.known() == {"a": fresh}


def test_seeded_counts_are_taken_only_whole() -> None:
    cache = CountCache()
    whole = {"documents": 1, "chunks": 2, "pending": 0, "failed": 0, "partly_skipped": 0}
    older = {"documents": 1, "chunks": 2, "pending": 0, "failed": 0}  # a record before a key
    cache.seed({"a": whole, "b": {"documents": 1}, "c": older})
    assert cache.known() == {"a": whole}


def test_a_view_lists_failures_unless_the_seeded_counts_know_of_none(
    manifest: Manifest, tmp_path: Path
) -> None:
    from ingestd.store.manifest.view import ManifestView

    doc = manifest.document("a", "d1.md")
    assert doc is not None
    manifest.update_document(doc.id, state="failed", error="boom")
    with ManifestView(tmp_path / "manifest.db") as view:
        view.seed_counts({s: manifest.counts(s) for s in ("a", "b")})
        queries: list[str] = []
        view._conn.set_trace_callback(queries.append)
        assert view.failed("a") == [("d1.md", "boom")]  # the kept count says one failed
        assert view.failed("b") == []
    assert len(queries) == 1 and "'a'" in queries[0], queries  # b's kept count is 0: not read
