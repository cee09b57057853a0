"""The sqlite3 view of the manifest answers exactly as the SQLAlchemy manifest does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ingestd.store.manifest.manifest import ChunkRow, Manifest, sqlite_url
from ingestd.store.manifest.view import ManifestView


def test_view_equals_the_manifest(tmp_path: Path) -> None:
    db = tmp_path / "manifest.db"
    m = Manifest(sqlite_url(db), now=lambda: 1000.0)
    try:
        m.ensure_source("b", "/srv/b", "coll")
        m.ensure_source("a", "/srv/a", "ingestd")
        m.set_last_sync("a", 1234.5)
        m.set_held_deletes("a", 7)
        m.set_last_change_synced("a", 1300.25)
        fields = {
            "size": 1,
            "mtime_ns": 1,
            "ctime_ns": 1,
            "inode": 1,
            "content_hash": "h",
            "rule_fingerprint": "f",
        }
        ok = m.upsert_document("a", "ok.md", **fields)
        bad = m.upsert_document("a", "bad.md", **fields, state="failed", error="binary file")
        m.upsert_document("a", "worse.md", **fields, state="failed", error=None)
        m.commit_document(ok, [ChunkRow(f"id{i}", f"c{i}", i, 0, 1) for i in range(3)])
        m.add_pending(bad, [ChunkRow("p1", "c", 0, 0, 1)])
        # two versions of one document share two of their points (a versioned source)
        v1 = m.upsert_document("b", "v1:guide.md", **fields)
        v2 = m.upsert_document("b", "v2:guide.md", **fields)
        m.commit_document(v1, [ChunkRow(f"s{i}", f"c{i}", i, 0, 1) for i in range(3)])
        m.commit_document(v2, [ChunkRow(f"s{i}", f"c{i}", i, 0, 1) for i in (1, 2, 3)])
        with ManifestView(db) as view:
            assert view.sources() == m.sources()
            assert view.sources()[0]["last_change_synced"] == 1300.25
            for s in ("a", "b", "nope"):
                assert view.counts(s) == m.counts(s)
                assert view.failed(s) == m.failed(s)
        assert m.counts("a") == {
            "documents": 3,
            "chunks": 3,
            "pending": 1,
            "failed": 2,
            "partly_skipped": 0,
        }
        # what the store should hold: one point per distinct id, as the writer counts
        assert m.counts("b")["chunks"] == 4
        assert m.collection_counts("coll") == (4, 0)
    finally:
        m.close()


def test_view_never_creates_a_database(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ManifestView(tmp_path / "manifest.db")
    assert not (tmp_path / "manifest.db").exists()
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # a database without the tables
    with ManifestView(empty) as view:
        assert view.sources() == [] and view.failed("a") == []
        assert view.counts("a") == {
            "documents": 0,
            "chunks": 0,
            "pending": 0,
            "failed": 0,
            "partly_skipped": 0,
        }


def test_view_reads_collections_and_migration_builds_as_the_manifest(tmp_path: Path) -> None:
    from ingestd.store.manifest.builds import BuildDoc, BuildDocuments

    db = tmp_path / "manifest.db"
    m = Manifest(sqlite_url(db), now=lambda: 1000.0)
    try:
        m.ensure_source("a", "/srv/a", "ingestd")
        with ManifestView(db) as view:  # nothing recorded yet
            assert view.collection_record("ingestd") is None is m.collection_record("ingestd")
            assert view.collection_build("ingestd") is None
            assert view.build_documents("ingestd") == 0
        profile = {"model": "m", "model_fingerprint": "f" * 64, "dim": 3, "tokenizer": "t"}
        m.record_collection("ingestd", {**profile, "fit_model": True})
        m.set_collection_aborted("ingestd", {**profile, "fit_model": False})
        m.start_collection_build(
            "ingestd", "ingestd__v2-ffff", "ingestd__v1", "migrate", {"previous": {}, "target": {}}
        )
        doc = BuildDoc("x.md", 1, 1, 1, 1, "h", "r", "ok", None, None, 1.0)
        BuildDocuments(m).commit("ingestd", "a", [doc])
        with ManifestView(db) as view:
            assert view.collection_record("ingestd") == m.collection_record("ingestd")
            assert view.collection_build("ingestd") == m.collection_build("ingestd")
            assert view.build_documents("ingestd") == m.build_documents("ingestd") == 1
    finally:
        m.close()
