"""``search --version V`` that no source searched holds is a usage error (exit 2) wherever
the versions of the sources searched are known, folders and sites included.

Before, it exited 2 only when a git source was searched; over folders or a sitemap
source the search ran and exited 0 with a note. Folders and sites have no versions, which
is known from the config or the state dir: the CLI now says so and exits 2. The MCP tool
and the Python API keep the note (no exit code to give). A git source read from the state
dir without its config has the versions its mirror's fetch record holds (what
``ingestd sources`` lists): it was taken for a source without versions.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.daemon.client import Client
from ingestd.daemon.commands.query.search import answer, wire_answer
from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from ingestd.daemon.wire.errors import DaemonError
from ingestd.store.search.query import Filters
from ingestd.store.search.request import SearchRequest
from tests.gitrepos import HistoryRepo
from tests.helpers import copy_tree, fake_vectors, ingested_tree, make_engine


def _search(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["search", "--mode", "sparse", *args])
    return res.exit_code, res.output


def test_an_unknown_version_of_folders_is_a_usage_error_naming_the_sources(
    tmp_path: Path,
) -> None:
    root, state = ingested_tree(tmp_path)
    name = str(root.resolve())
    said = f"unknown version nope: no source searched has versions ({name}); a version is a "
    # sources the state dir records (no config), then a config naming the folder
    config = tmp_path / "c.yaml"
    config.write_text(f"sources:\n  - {{root: {root}}}\n")
    for extra in ((), ("--config", str(config))):
        code, out = _search("--state-dir", str(state), *extra, "--version", "nope", "collector")
        assert code == 2, out
        assert said in out
    code, out = _search("--state-dir", str(state), "collector")  # no version: answers as before
    assert code == 0 and "1. " in out, out


def test_a_sitemap_source_has_no_versions_either(tmp_path: Path) -> None:
    """Known from the config alone: the site need not have been fetched."""
    root, state = ingested_tree(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"sources:\n  - {{root: {root}, name: docs}}\n"
        "  - {kind: sitemap, name: site, url: 'http://127.0.0.1:9/sitemap.xml'}\n"
    )
    common = ("--config", str(config), "--state-dir", str(state), "--version", "v1")
    code, out = _search(*common, "--source", "site", "collector")
    assert code == 2, out
    assert "unknown version v1: no source searched has versions (site)" in out
    code, out = _search(*common, "collector")
    assert code == 2, out
    assert "unknown version v1: no source searched has versions (docs, site)" in out


def test_a_search_of_configured_sources_never_synced_says_nothing_is_indexed(
    tmp_path: Path,
) -> None:
    """It was an unexpected error (exit 3, a traceback): no manifest yet."""
    config = tmp_path / "c.yaml"
    config.write_text(f"sources:\n  - {{root: {tmp_path}}}\n")
    code, out = _search("--config", str(config), "--state-dir", str(tmp_path / "s"), "x")
    assert code == 1, out
    assert "nothing indexed in" in out and "Traceback" not in out


def test_the_mcp_tool_and_the_api_keep_the_note_and_the_wire_carries_the_rule(
    tmp_path: Path,
) -> None:
    """``answer`` (the MCP tool's and the API's path) notes it; a request with
    ``strict_version`` (the CLI's, also through a daemon's socket) is refused."""
    root, state = ingested_tree(tmp_path)
    eng = make_engine(root, state, fake_vectors)
    try:
        got = answer(eng, "collector", version="nope", mode="sparse")
        assert got["hits"] == []
        assert any(
            n.startswith("nothing matches version nope: no source has versions")
            for n in got["notes"]
        ), got["notes"]
        request = SearchRequest(
            "collector", 5, "sparse", Filters(version="nope"), strict_version=True
        )
        assert SearchRequest.from_wire(request.wire()) == request
        with pytest.raises(DaemonError) as err:
            wire_answer(eng, **request.wire())
        assert err.value.exit_code == 2
        assert "unknown version nope: no source searched has versions" in str(err.value)
        assert "strict_version" not in SearchRequest("the").wire()  # older daemons
    finally:
        eng.close()


def _git_and_folder_state(tmp_path: Path) -> Path:
    """A state dir holding git source ``book`` (versions ``main`` and ``v1``, a real
    repository fetched) and a folder source, synced by an engine of their config."""
    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.tag("v1")
    repo.push("main", "v1")
    docs = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    sources = [
        {"kind": "git", "name": "book", "url": str(repo.origin), "refs": ["main", "v*"]},
        {"root": str(docs), "name": "docs"},
    ]
    eng = Engine(load_config(None, overrides={"sources": sources}), state, embed_model=fake_vectors)
    try:
        eng.context.source("book").refresh()  # type: ignore[attr-defined]
        for name in eng.context.sources:
            eng.sync(name)
    finally:
        eng.close()
    return state


def test_a_git_source_read_without_its_config_has_the_versions_the_state_dir_records(
    tmp_path: Path,
) -> None:
    """Its mirror's fetch record (what ``ingestd sources`` lists) gives its versions: an
    unknown one exits 2 listing them, as with the config (it ran and said "no source has
    versions", exit 0); a known one still finds its text, and a filter that matches
    nothing is not told it names no version."""
    state = _git_and_folder_state(tmp_path)
    said = "unknown version v9; known versions: book: main, v1"
    for extra in ((), ("--source", "book")):
        code, out = _search("--state-dir", str(state), *extra, "--version", "v9", "ownership")
        assert code == 2, out
        assert said in out
    code, out = _search("--state-dir", str(state), "--version", "v1", "ownership")
    assert code == 0 and "1. " in out and "version: v1" in out, out
    code, out = _search("--state-dir", str(state), "--version", "main", "--path", "src", "zqxj")
    assert code == 0 and "no results" in out, out
    assert "nothing matches" not in out  # version main and path src hold documents
    code, out = _search("--state-dir", str(state), "--path", "nowhere", "zqxj")
    assert "nothing matches path nowhere" in out, out


def test_the_api_on_the_state_dir_alone_knows_the_recorded_versions(tmp_path: Path) -> None:
    """The Python API (and the MCP tool: the same ``answer``) on the state dir alone
    refuses an unknown version as with the config (it noted "no source has versions")."""
    state = _git_and_folder_state(tmp_path)
    client = Client(state)
    with pytest.raises(DaemonError) as err:
        client.search("ownership", version="v9", mode="sparse")
    assert err.value.exit_code == 2
    assert "unknown version v9; known versions: book: main, v1" in str(err.value)
    got = client.search("ownership", version="main", mode="sparse")
    assert got and all(h["version"] == "main" for h in got), got.notes


def test_read_at_a_version_on_the_state_dir_alone_finds_the_git_sources_file(
    tmp_path: Path,
) -> None:
    """``read --path P --version V`` over a state dir without its config reads a git
    source's file at that version, as ``search`` finds it (it said P is not an indexed
    document of any source at version V: only a config made a source versioned)."""
    state = _git_and_folder_state(tmp_path)
    client = Client(state)
    (hit, *_) = client.search("ownership", version="v1", mode="sparse")
    got = client.read(path=hit["path"], version="v1")
    assert got["source"] == "book" and got["path"] == hit["path"], got
    assert got.get("version") == "v1", dict(got)
    # the mirror is read as a folder there: the file's text at v1 is its indexed chunks
    assert got["lines"] is None and got["chunks"], dict(got)
    assert all(c["text"] for c in got["chunks"]), dict(got)
    assert got["chunks"][0]["start_line"] == 1  # the file from its first line
    with pytest.raises(DaemonError) as err:
        client.read(path="nowhere.md")
    assert "book hold(s) versions: give version" in str(err.value)
