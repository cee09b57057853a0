"""The ``read`` and ``sync`` control commands, on an engine (fake embedder)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.commands.index.sync import scopes, sync
from ingestd.daemon.commands.query.read import read
from ingestd.daemon.commands.query.search import search as search_cmd
from ingestd.daemon.wire.errors import DaemonError
from tests.helpers import fake_vectors, make_engine


@pytest.fixture
def engine(tree: Path, tmp_path: Path) -> Iterator[Any]:
    eng = make_engine(tree, tmp_path / "state", fake_vectors)
    try:
        for name in eng.context.sources:
            eng.sync(name)
        yield eng
    finally:
        eng.close()


def _hit(engine: Any, query: str, path: str | None = None) -> dict[str, Any]:
    hits = search_cmd(engine, query, k=1, mode="sparse", path=path)
    assert hits, query
    return hits[0]


def test_read_widens_a_hit_to_its_neighbours_section_and_file_lines(
    engine: Any, tree: Path
) -> None:
    hit = _hit(engine, "batch processor exporter", "docs/collector/architecture.md")
    got = read(engine, id=hit["id"], context=1)
    assert (got["source"], got["path"]) == (hit["source"], hit["path"])
    assert got["hit"]["id"] == hit["id"] and got["hit"]["text"] == hit["text"]
    ordinals = [c["ordinal"] for c in got["chunks"]]
    assert ordinals == sorted(ordinals) and hit["ordinal"] in ordinals and len(ordinals) <= 3
    sec = got["section"]
    assert sec["heading_path"] == hit["heading_path"]
    assert sec["start_line"] <= hit["start_line"] <= hit["end_line"] <= sec["end_line"]
    lines = got["lines"]
    file_lines = (tree / hit["path"]).read_text().split("\n")
    want = "\n".join(file_lines[lines["start_line"] - 1 : lines["end_line"]])
    assert lines["text"] == want and not lines["truncated"] and not got["stale"]
    assert hit["text"].strip() in lines["text"]


def test_read_gives_the_exact_neighbours_in_document_order(engine: Any) -> None:
    hit = _hit(engine, "glossary", "docs/concepts/glossary.md")
    doc = engine.resources.manifest.document(hit["source"], hit["path"])
    ids = [r.point_id for r in engine.resources.manifest.chunks(doc.id)]  # by ordinal
    i = ids.index(hit["id"])
    got = read(engine, id=hit["id"], context=2)
    assert [c["id"] for c in got["chunks"]] == ids[max(0, i - 2) : i + 3]


def test_the_text_before_the_first_heading_is_a_section_of_its_own(engine: Any) -> None:
    chunks = read(engine, path="docs/collector/architecture.md", max_lines=2000)["chunks"]
    preamble = [c for c in chunks if not c["heading_path"]]
    assert preamble and chunks[0] is preamble[0] and chunks[len(preamble)]["heading_path"]
    got = read(engine, id=preamble[0]["id"], context=0)
    assert got["section"] == {
        "heading_path": [],
        "start_line": preamble[0]["start_line"],
        "end_line": preamble[-1]["end_line"],
    }


def test_read_of_a_long_section_returns_at_most_max_lines_around_the_hit(engine: Any) -> None:
    hit = _hit(engine, "glossary", "docs/concepts/glossary.md")
    got = read(engine, id=hit["id"], context=0, max_lines=3)
    lines = got["lines"]
    assert lines["end_line"] - lines["start_line"] + 1 <= 3


def test_read_a_document_by_path_and_lines(engine: Any, tree: Path) -> None:
    rel = "docs/collector/quick-start.md"
    got = read(engine, path=rel, start_line=20, end_line=30)
    assert got["hit"] is None and got["section"] is None
    file_lines = (tree / rel).read_text().split("\n")
    assert got["lines"]["text"] == "\n".join(file_lines[19:30])
    assert (got["lines"]["start_line"], got["lines"]["end_line"]) == (20, 30)
    chunks = got["chunks"]
    assert chunks and all(c["start_line"] <= 30 and c["end_line"] >= 20 for c in chunks)
    assert "text" not in got["chunks"][0]
    whole = read(engine, path="./" + rel, max_lines=2)
    assert whole["lines"]["truncated"] and whole["lines"]["end_line"] == 2


def test_read_says_when_the_file_changed_since_it_was_indexed(engine: Any, tree: Path) -> None:
    hit = _hit(engine, "glossary", "docs/concepts/glossary.md")
    (tree / hit["path"]).write_text("# Rewritten\n\nNothing left.\n")
    got = read(engine, id=hit["id"])
    assert got["stale"] and got["hit"]["text"] == hit["text"]  # the index's chunk, today's lines


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        ({}, "give either id", 2),
        ({"id": "x", "path": "a.md"}, "give either id", 2),
        ({"id": "not-a-uuid"}, "not a chunk id", 2),
        ({"id": "00000000-0000-0000-0000-000000000000"}, "no chunk", 1),
        ({"path": "nope.md"}, "not an indexed document", 1),
        ({"path": "docs/concepts/glossary.md", "source": "nope"}, "unknown source: nope", 2),
        ({"path": "docs/concepts/glossary.md", "start_line": 5, "end_line": 2}, "bad line", 2),
        ({"path": "docs/concepts/glossary.md", "context": 99}, "context must be", 2),
        ({"path": "docs/concepts/glossary.md", "start_line": 10**18}, "past the end of", 2),
    ],
)
def test_read_errors_are_one_line_with_an_exit_code(
    engine: Any, args: dict[str, Any], message: str, code: int
) -> None:
    with pytest.raises(DaemonError) as err:
        read(engine, **args)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert err.value.exit_code == code


def test_sync_of_an_edited_path_makes_it_searchable(
    engine: Any, tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    page = tree / "docs/concepts/glossary.md"
    page.write_text(page.read_text() + "\n\n## Zebras\n\nZebrafication of telemetry.\n")
    with caplog.at_level(logging.INFO, logger="ingestd.daemon.commands.index.sync"):
        got = sync(engine, ["docs/concepts/glossary.md"])
        (name,) = engine.context.sources
        assert caplog.messages == [
            f"sync of source {name} (1 path(s)): 1 indexed, 0 deleted, 0 failed"
        ]
        caplog.clear()
        sync(engine, ["docs/concepts/glossary.md"])  # nothing written: no line
        assert caplog.messages == []
    assert got["complete"] and got["seconds"] >= 0
    (src,) = got["sources"]
    assert src["indexed"] == 1 and src["scope"] == ["docs/concepts/glossary.md"]
    assert got["summary"][0].endswith("; all searchable")
    assert "Zebrafication" in _hit(engine, "zebrafication")["text"]


def test_sync_without_paths_scans_every_source(engine: Any, tree: Path) -> None:
    (tree / "docs/concepts/glossary.md").unlink()
    got = sync(engine)
    (src,) = got["sources"]
    assert src["scope"] == "scan" and src["deleted"] == 1 and got["complete"]


def test_sync_paths_map_to_sources_and_are_checked(engine: Any, tree: Path) -> None:
    (name,) = engine.context.sources
    root = Path(engine.context.sources[name].root)
    (root / "docs").mkdir(exist_ok=True)
    for rel in ("docs/a.md", "docs/b.md"):
        (root / rel).write_text("# A page\n")
    assert scopes(engine, None) == {name: None}
    assert scopes(engine, [str(root / "docs" / "a.md"), "docs/b.md"]) == {
        name: ["docs/a.md", "docs/b.md"]
    }
    assert scopes(engine, [str(root), "docs/b.md"]) == {name: None}
    for bad, message in (("/nowhere/x.md", "under no source"), ("../x.md", "cannot contain ..")):
        with pytest.raises(DaemonError, match=message) as err:
            scopes(engine, [bad])
        assert err.value.exit_code == 2
    with pytest.raises(DaemonError, match="unknown source"):
        scopes(engine, None, ["nope"])


def test_sync_of_a_path_no_source_holds_says_so(engine: Any, tree: Path) -> None:
    # a typo used to be planned, found nothing, and report "complete, all searchable"
    (name,) = engine.context.sources
    engine.sync(name)
    with pytest.raises(DaemonError, match="nonexistent.md: not a file or folder of") as err:
        sync(engine, ["nonexistent.md"])
    assert err.value.exit_code == 2
    with pytest.raises(DaemonError, match=r"^docs/nope/: |^docs/nope: "):
        sync(engine, ["docs/nope/", "docs/concepts"])
    # a file deleted since it was indexed is held by the manifest: syncing it deletes it
    page = next(tree.rglob("*.md"))
    rel = page.relative_to(tree).as_posix()
    page.unlink()
    report = sync(engine, [rel])
    assert report["complete"] and report["sources"][0]["deleted"] == 1
    assert sync(engine, ["docs"])["complete"]  # a folder of the source


def test_read_of_a_hierarchical_child_gives_its_parent_section(tree: Path, tmp_path: Path) -> None:
    rules = [{"name": "h", "match": ["*"], "chunker": "hierarchical"}]
    eng = make_engine(tree, tmp_path / "h-state", fake_vectors, rules=rules)
    try:
        for name in eng.context.sources:
            eng.sync(name)
        hit = search_cmd(eng, "collector pipeline", k=1, mode="sparse", expand=True)[0]
        parent = hit["parent"]
        got = read(eng, id=hit["id"], max_lines=2000)
        assert got["section"] == {
            "heading_path": parent.get("heading_path") or [],
            "start_line": parent["start_line"],
            "end_line": parent["end_line"],
        }
        assert got["lines"]["start_line"] == parent["start_line"]
        assert all(c["id"] != hit["parent_id"] for c in got["chunks"])  # parents are no hits
    finally:
        eng.close()
