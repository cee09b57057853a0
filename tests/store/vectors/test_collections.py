"""Collection versions behind an alias, on qdrant-client's embedded mode.

A legacy collection (a physical collection under the configured name, no sparse
vector) becomes ``<name>__v2`` behind the alias ``<name>``; writes go to the version
being built while searches read the current one; points the caller did not re-write
are carried over with the new payload key; a crash at any step resumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient, models

from ingestd.store.manifest.manifest import ChunkRow, Manifest, sqlite_url
from ingestd.store.search.query import PATH_KEY, Filters, path_prefixes
from ingestd.store.search.sparse import document_vector, query_vector
from ingestd.store.vectors.base import Point
from ingestd.store.vectors.versions import CollectionVersions
from tests.helpers import open_store

DIM = 4


def _pid(i: int) -> str:
    return f"00000000-0000-0000-0000-{i:012d}"


def _legacy(state: Path, n: int = 3) -> None:
    """A store as written before versions: physical ``ingestd``, dense only, no path key."""
    client = QdrantClient(path=str(state / "qdrant"))
    client.create_collection(
        "ingestd", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    client.upsert(
        "ingestd",
        [
            models.PointStruct(
                id=_pid(i),
                vector=[1.0, float(i), 0.0, 0.0],
                payload={"source": "s", "path": f"docs/f{i}.md", "text": f"text {i}"},
            )
            for i in range(n)
        ],
    )
    client.close()
    m = Manifest(sqlite_url(state / "manifest.db"))
    m.ensure_source("s", "/nowhere", "ingestd")
    for i in range(n):
        doc = m.upsert_document("s", f"docs/f{i}.md")
        m.commit_document(doc, [ChunkRow(_pid(i), f"h{i}", 0, 0, 6)])
    m.close()


def _open(state: Path, engine: str = "local") -> tuple[Any, Manifest, CollectionVersions]:
    store = open_store(state / ("edge" if engine == "edge" else "qdrant"), engine)
    manifest = Manifest(sqlite_url(state / "manifest.db"))
    return store, manifest, CollectionVersions(store, manifest)


def _point(i: int, text: str) -> Point:
    path = f"docs/f{i}.md"
    payload = {"source": "s", "path": path, PATH_KEY: path_prefixes(path), "text": text}
    return Point(_pid(i), [1.0, float(i), 0.0, 0.0], payload, document_vector(text))


def test_a_new_collection_is_version_1_behind_its_alias(tmp_path: Path, qdrant_engine: str) -> None:
    store, manifest, versions = _open(tmp_path, qdrant_engine)
    assert versions.pending("ingestd", DIM) is None
    lay = store.layout("ingestd")
    assert (lay.physical, lay.aliased, lay.sparse, lay.current) == ("ingestd__v1", True, True, True)
    assert store.aliases() == {"ingestd": "ingestd__v1"}
    with pytest.raises(ValueError, match="4-dim vectors, the model makes 8"):
        store.ensure_collection("ingestd", 8)
    store.close()
    manifest.close()


@pytest.mark.engine("local")  # a legacy store is one of qdrant-client's local mode
def test_legacy_store_upgrades_without_losing_a_point(tmp_path: Path) -> None:
    _legacy(tmp_path)
    store, manifest, versions = _open(tmp_path)
    assert versions.pending("ingestd", DIM) == "upgrade"
    target = versions.begin("ingestd", DIM, "sparse vectors")
    assert target == "ingestd__v2"
    assert store.write_target("ingestd") == "ingestd__v2"
    store.upsert("ingestd", [_point(1, "rewritten one")])  # the caller re-writes a document
    # searches still answer from the legacy version, dense only
    during = store.search("ingestd", dense=[1, 0, 0, 0], sparse=None, limit=5, mode="dense")
    assert {h.payload["text"] for h in during} == {"text 0", "text 1", "text 2"}
    copied = versions.finish("ingestd")
    assert copied == 2  # f0 and f2 carried over, f1 written by the caller
    assert store.aliases() == {"ingestd": "ingestd__v2"}
    assert store.versions("ingestd") == {2: "ingestd__v2"}
    assert store.layout("ingestd").current
    assert store.write_target("ingestd") == "ingestd"
    assert manifest.collection_build("ingestd") is None
    got = {pid: p for pid, p in store.scroll("ingestd")}
    assert set(got) == {_pid(0), _pid(1), _pid(2)}
    assert got[_pid(1)]["text"] == "rewritten one"
    assert got[_pid(0)][PATH_KEY] == ["docs", "docs/f0.md"]  # key added on the way
    assert store.sparse_vectors("ingestd", [_pid(0), _pid(1)]) == {
        _pid(0): None,  # its text is not in the payload: written by the next sync
        _pid(1): document_vector("rewritten one"),
    }
    hits = store.search(
        "ingestd", dense=[1, 0, 0, 0], sparse=query_vector("rewritten"), limit=1,
        filters=Filters(path="docs/f2.md"),
    )  # fmt: skip
    assert [h.id for h in hits] == [_pid(2)]
    store.close()
    manifest.close()


class _Crash(Exception):
    pass


def _version_1(state: Path, engine: str) -> None:
    """A current store: ``ingestd__v1`` behind the alias, three points the manifest knows."""
    store, manifest, versions = _open(state, engine)
    versions.pending("ingestd", DIM)
    store.upsert("ingestd", [_point(i, f"text {i}") for i in range(3)])
    manifest.ensure_source("s", "/nowhere", "ingestd")
    for i in range(3):
        doc = manifest.upsert_document("s", f"docs/f{i}.md")
        manifest.commit_document(doc, [ChunkRow(_pid(i), f"h{i}", 0, 0, 6)])
    store.close()
    manifest.close()


@pytest.mark.parametrize(
    ("start", "crash_at"),
    [
        ("legacy", "create"),
        ("legacy", "copy"),
        ("legacy", "alias"),
        ("version 1", "copy"),
        ("version 1", "alias"),
        ("version 1", "drop"),
    ],
)
def test_an_interrupted_build_resumes(
    tmp_path: Path, start: str, crash_at: str, monkeypatch: pytest.MonkeyPatch, qdrant_engine: str
) -> None:
    """A crash in any step of a build leaves a state the next process finishes."""
    if start == "legacy":
        if qdrant_engine != "local":
            pytest.skip("a legacy store is one of qdrant-client's local mode")
        _legacy(tmp_path)
    else:
        _version_1(tmp_path, qdrant_engine)
    store, manifest, versions = _open(tmp_path, qdrant_engine)
    cls = type(store)
    methods = {
        "create": "create_physical",
        "copy": "retrieve_points",
        "alias": "point_alias",
        "drop": "drop_collection",
    }
    real = getattr(cls, methods[crash_at])

    def crashing(self: Any, *args: Any, **kwargs: Any) -> Any:
        if crash_at == "alias" and start == "legacy":
            self.client.delete_collection("ingestd")  # the legacy name is gone first
        raise _Crash

    monkeypatch.setattr(cls, methods[crash_at], crashing)
    with pytest.raises(_Crash):
        versions.begin("ingestd", DIM, "sparse vectors")
        store.upsert("ingestd", [_point(1, "rewritten one")])
        versions.finish("ingestd")
    store.close()
    manifest.close()
    monkeypatch.setattr(cls, methods[crash_at], real)

    store, manifest, versions = _open(tmp_path, qdrant_engine)
    assert versions.pending("ingestd", DIM) == "resume"
    versions.begin("ingestd", DIM, "sparse vectors")
    if versions.phase("ingestd") == "building":
        store.upsert("ingestd", [_point(1, "rewritten one")])
    versions.finish("ingestd")
    assert versions.pending("ingestd", DIM) is None
    assert store.aliases() == {"ingestd": "ingestd__v2"}
    assert store.versions("ingestd") == {2: "ingestd__v2"}
    assert {pid for pid, _ in store.scroll("ingestd")} == {_pid(0), _pid(1), _pid(2)}
    store.close()
    manifest.close()


def test_a_second_build_switches_the_alias_atomically(tmp_path: Path, qdrant_engine: str) -> None:
    store, manifest, versions = _open(tmp_path, qdrant_engine)
    versions.pending("ingestd", DIM)
    store.upsert("ingestd", [_point(0, "zero"), _point(1, "one")])
    m_doc = manifest.upsert_document("s", "docs/f0.md")
    manifest.ensure_source("s", "/nowhere", "ingestd")
    manifest.commit_document(m_doc, [ChunkRow(_pid(0), "h0", 0, 0, 4)])
    versions.begin("ingestd", DIM, "new model")
    store.upsert("ingestd", [_point(1, "one")])
    assert versions.finish("ingestd") == 1  # f0 carried over with its sparse vector
    assert store.aliases() == {"ingestd": "ingestd__v2"}
    assert store.versions("ingestd") == {2: "ingestd__v2"}
    assert store.sparse_vectors("ingestd", [_pid(0)]) == {_pid(0): document_vector("zero")}
    store.close()
    manifest.close()
