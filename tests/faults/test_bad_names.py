"""One bad name or document never fails its neighbours.

The bug this pins: a file named ``bad\\xff.md`` (not UTF-8; Python hands it over as
``bad\\udcff.md``) raised ``UnicodeEncodeError`` from the point-id code. Its whole
write batch failed forever, the good files in that batch were never indexed,
``resync`` and ``verify`` exited 3, and ``status`` said healthy. Such names cannot be
stored (the manifest, the point ids and the payload hold paths as UTF-8 text), so the
scanner skips them with one warning and a ``status`` entry; and any error of one
document while it is prepared or written is recorded as that document's error.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.sources.base import display_path, name_problem
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.sources.walk import scan
from ingestd.daemon.sync.preparing import documents
from tests.daemon.harness import Harness
from tests.faults.conftest import BAD_DIR, BAD_FILE, write_bytes_name
from tests.helpers import (
    CountingEmbedder,
    assert_matches_oracle,
    fake_vectors,
    make_engine,
    run_cli,
    store_snapshot,
    wait_for,
)

BAD_DISPLAY = "bad\\xff.md"


def _bad_tree(root: Path) -> None:
    write_bytes_name(root, BAD_FILE, b"# Bad name\n\nNever indexed.\n")
    write_bytes_name(root, BAD_DIR + b"/inside.md", b"# Inside\n\nUnder a bad folder name.\n")


def test_names_that_are_not_utf8_are_skipped_by_the_scan(docs: Path) -> None:
    _bad_tree(docs)
    from ingestd.daemon.config import SourceConfig

    found = scan(SourceFilter(SourceConfig(root=docs)))
    assert all(name_problem(p) is None for p in found)
    assert "good.md" in found and len(found) == 3
    assert found.skipped == {
        BAD_DISPLAY: "file name is not valid UTF-8; skipped",
        "dir\\xfe/": "folder name is not valid UTF-8: nothing in it is indexed",
    }
    assert display_path("a/b\udcff.md") == "a/b\\xff.md"


def test_bad_names_never_fail_the_good_files(
    docs: Path, tmp_path: Path, fake_embedder: CountingEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    _bad_tree(docs)
    caplog.set_level(logging.WARNING, "ingestd")
    eng = make_engine(docs, tmp_path / "state", fake_embedder)
    (name,) = eng.context.sources
    res = eng.sync(name)
    assert (res.indexed, res.failed, res.retry) == (3, 0, [])
    assert [e["path"] for e in eng.failures.skipped_entries(name)] == [BAD_DISPLAY, "dir\\xfe/"]
    assert eng.sync(name).indexed == 0  # a rescan: no new warning, nothing written
    assert eng.verify(name).clean
    eng.close()
    assert caplog.text.count("skipping bad\\xff.md") == 1
    # the from-scratch oracle applies the same policy
    assert_matches_oracle(docs, tmp_path / "state", tmp_path, fake_vectors)


@pytest.mark.slow
def test_a_bad_name_in_a_live_batch_leaves_its_neighbours_indexed(
    docs: Path, scratch: Path, fake_embedder: CountingEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    with Harness(docs, scratch / "state", fake_embedder) as h:
        b = h.service.batches_done
        # one batch: a good new file next to a bad name, and a bad folder
        (docs / "fresh.md").write_text("# Fresh\n\nWritten with a bad neighbour.\n")
        _bad_tree(docs)
        h.settle(b)
        assert "fresh.md" in {p["path"] for p in h.points().values()}
        (src,) = h.service.status()["sources"]
        assert BAD_DISPLAY in {e["path"] for e in src["skipped"]}
        assert h.service.status()["daemon"]["healthy"]
        # deleting the bad file takes it off the list
        Path(str(docs) + "/" + "bad\udcff.md").unlink()
        wait_for(
            lambda: (
                BAD_DISPLAY not in {e["path"] for e in h.service.status()["sources"][0]["skipped"]}
            ),
            20,
            "the deleted bad name to leave status",
        )
        h.assert_matches_oracle(scratch)
    assert caplog.text.count("skipping bad\\xff.md") == 1


class _Failing:
    """A store whose upserts of points of ``path`` raise ``ValueError`` (a rejected payload)."""

    def __init__(self, inner: Any, path: str) -> None:
        self.inner = inner
        self.path = path

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def upsert(self, collection: str, points: list[Any]) -> None:
        if any(p.payload["path"] == self.path for p in points):
            raise ValueError(f"payload of {self.path} rejected")
        self.inner.upsert(collection, points)


def test_a_document_that_cannot_be_written_fails_alone(
    docs: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine
    from ingestd.store.vectors.client.qdrant import QdrantStore

    state = tmp_path / "state"
    state.mkdir()
    store = _Failing(QdrantStore(path=str(state / "qdrant"), engine="local"), "good.md")
    eng = Engine(load_config(None, roots=[docs]), state, embed_model=fake_embedder, store=store)
    (name,) = eng.context.sources
    res = eng.sync(name)  # one group of three documents
    assert (res.indexed, res.failed) == (2, 1)
    failed = dict(eng.resources.manifest.failed(name))
    assert failed["good.md"].startswith("cannot be written: ValueError: payload of good.md")
    paths = {p["path"] for _, p in eng.resources.store.scroll("ingestd", name)}
    assert paths == {"docs/concepts/glossary.md", "docs/collector/deploy/gateway.md"}
    assert not eng.resources.manifest.has_pending(name)  # nothing of good.md is left pending
    eng.close()


def test_an_error_preparing_one_document_is_its_own(
    docs: Path, tmp_path: Path, fake_embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = documents.point_ids

    def point_ids(source: str, path: str, hashes: Any) -> list[str]:
        if path == "good.md":
            raise UnicodeEncodeError("utf-8", path, 0, 1, "surrogates not allowed")
        return real(source, path, hashes)

    monkeypatch.setattr(documents, "point_ids", point_ids)
    eng = make_engine(docs, tmp_path / "state", fake_embedder)
    (name,) = eng.context.sources
    res = eng.sync(name)
    assert (res.indexed, res.failed) == (2, 1)
    assert dict(eng.resources.manifest.failed(name))["good.md"].startswith(
        "cannot be prepared: UnicodeEncodeError"
    )
    assert eng.verify(name).clean  # the oracle fails it the same way
    eng.close()


@pytest.mark.slow
def test_resync_and_verify_exit_0_beside_a_bad_name(tmp_path: Path) -> None:
    """End to end with the real model: the one-shot commands skip the name and say so."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nA neighbour that must be indexed.\n")
    write_bytes_name(root, BAD_FILE, b"# Bad\n\nNever indexed.\n")
    state = tmp_path / "state"
    res = run_cli("resync", "--state-dir", str(state), str(root), timeout=240)
    assert res.returncode == 0, res.stderr
    assert f"skipped {BAD_DISPLAY}: file name is not valid UTF-8" in res.stderr
    ver = run_cli("verify", "--state-dir", str(state), "--json", str(root), timeout=240)
    assert ver.returncode == 0, ver.stderr
    assert json.loads(ver.stdout)["clean"]
    assert {p["path"] for p in store_snapshot(state).values()} == {"good.md"}
