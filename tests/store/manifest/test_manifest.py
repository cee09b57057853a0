"""The manifest: migrations, documents and their point rows, SQLite pragmas."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestd.store.manifest.database import MIGRATIONS
from ingestd.store.manifest.manifest import ChunkRow, Manifest, ModelMismatchError, sqlite_url


@pytest.fixture
def manifest(tmp_path: Path):
    m = Manifest(sqlite_url(tmp_path / "manifest.db"), now=lambda: 1000.0)
    yield m
    m.close()


def test_migrations_run_once(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "m.db")
    Manifest(url).close()
    m = Manifest(url)
    with m.engine.connect() as conn:
        names = [r[0] for r in conn.exec_driver_sql("SELECT name FROM schema_migrations")]
        mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    assert names == [name for name, _ in MIGRATIONS]
    assert names[:3] == ["001_initial", "002_held_deletes", "003_collection_builds"]
    assert mode == "wal"
    m.close()


def test_a_manifest_from_before_collection_builds_gains_the_table(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "m.db")
    m = Manifest(url)
    with m.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE collection_builds")
        conn.exec_driver_sql("DELETE FROM schema_migrations WHERE name = '003_collection_builds'")
    m.close()
    m = Manifest(url)
    m.start_collection_build("c", "c__v2", "c", "upgrade")
    m.update_collection_build("c", done_source="docs")
    build = m.collection_build("c")
    assert build is not None
    assert (build["target"], build["phase"], build["done_sources"]) == (
        "c__v2",
        "building",
        ["docs"],
    )
    m.end_collection_build("c")
    assert m.collection_build("c") is None
    m.close()


def test_pending_then_commit(manifest: Manifest) -> None:
    manifest.ensure_source("s", "/r", "ingestd")
    doc = manifest.upsert_document("s", "a.md")
    rows = [ChunkRow(f"id{i}", f"h{i}", i, i * 10, i * 10 + 9) for i in range(3)]
    manifest.add_pending(doc, rows[:2])
    assert manifest.pending_doc_ids("s") == {doc}
    assert [c.pending for c in manifest.chunks(doc)] == [True, True]
    manifest.commit_document(doc, rows, content_hash="c", state="ok")
    assert manifest.pending_doc_ids("s") == set()
    assert [c.point_id for c in manifest.chunks(doc)] == ["id0", "id1", "id2"]
    assert manifest.counts("s") == {
        "documents": 1,
        "chunks": 3,
        "pending": 0,
        "failed": 0,
        "partly_skipped": 0,
    }
    assert manifest.point_ids_for_hashes(["h1", "nope"]) == {"h1": "id1"}


def test_prefix_query_finds_a_folder(manifest: Manifest) -> None:
    manifest.ensure_source("s", "/r", "ingestd")
    for p in ("a/x.md", "a/b/y.md", "ab/z.md", "a.md"):
        manifest.upsert_document("s", p)
    assert sorted(manifest.documents("s", prefix="a")) == ["a/b/y.md", "a/x.md"]


def test_forget_source_removes_rows(manifest: Manifest) -> None:
    manifest.ensure_source("s", "/r", "ingestd")
    doc = manifest.upsert_document("s", "a.md")
    manifest.commit_document(doc, [ChunkRow("id", "h", 0, 0, 1)])
    manifest.forget_source("s")
    assert manifest.sources() == [] and manifest.counts("s")["chunks"] == 0


def test_collection_model_mismatch_is_an_error(manifest: Manifest) -> None:
    manifest.check_collection("ingestd", "all-MiniLM-L6-v2", "f" * 64, 384)
    manifest.check_collection("ingestd", "all-MiniLM-L6-v2", "f" * 64, 384)
    with pytest.raises(ModelMismatchError, match="holds vectors of model"):
        manifest.check_collection("ingestd", "other", "e" * 64, 768)


def test_a_manifest_from_before_shared_points_keys_chunks_by_point_and_document(
    tmp_path: Path,
) -> None:
    """Migration 006: the rows of ``chunks`` survive; two documents may then hold one id."""
    url = sqlite_url(tmp_path / "m.db")
    m = Manifest(url)
    m.ensure_source("s", "/r", "ingestd")
    doc = m.upsert_document("s", "v1:a.md")
    rows = [ChunkRow(f"id{i}", f"h{i}", i, i * 10, i * 10 + 9) for i in range(3)]
    m.commit_document(doc, rows, state="ok")
    cols = "point_id VARCHAR(36) NOT NULL PRIMARY KEY, doc_id INTEGER NOT NULL, "
    cols += "chunk_hash VARCHAR(64) NOT NULL, ordinal INTEGER NOT NULL, "
    cols += "start_char INTEGER NOT NULL, end_char INTEGER NOT NULL, pending BOOLEAN NOT NULL"
    with m.engine.begin() as conn:  # the table as it was: keyed by point id alone
        conn.exec_driver_sql("ALTER TABLE chunks RENAME TO chunks_now")
        conn.exec_driver_sql("DROP INDEX ix_chunks_doc")
        conn.exec_driver_sql("DROP INDEX ix_chunks_hash")
        conn.exec_driver_sql(f"CREATE TABLE chunks ({cols})")
        conn.exec_driver_sql("INSERT INTO chunks SELECT * FROM chunks_now")
        conn.exec_driver_sql("DROP TABLE chunks_now")
        conn.exec_driver_sql("CREATE INDEX ix_chunks_doc ON chunks (doc_id)")
        conn.exec_driver_sql("CREATE INDEX ix_chunks_hash ON chunks (chunk_hash)")
        conn.exec_driver_sql("DELETE FROM schema_migrations WHERE name = '006_shared_points'")
    m.close()
    m = Manifest(url)
    try:
        assert m.chunks(doc) == rows
        other = m.upsert_document("s", "v2:a.md")
        m.add_pending_many({other: rows[:2]}, shared=True)
        m.commit_document(other, rows[:2], state="ok")
        assert m.chunks(doc) == rows and m.chunks(other) == rows[:2]
        assert m.holders(["id0", "id2"]) == {
            "id0": [(doc, "v1:a.md"), (other, "v2:a.md")],
            "id2": [(doc, "v1:a.md")],
        }
        assert m.holders(["id0"], exclude=[doc]) == {"id0": [(other, "v2:a.md")]}
        assert m.counts("s")["chunks"] == 3  # distinct points
        assert m.collection_counts("ingestd") == (3, 0)
    finally:
        m.close()
