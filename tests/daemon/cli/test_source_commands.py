"""Commands an operator types about a source, as the guides give them, work as printed.

The config check (``resync --dry-run``) of a git source served by a real ``git daemon``
on loopback; ``resync`` taking a source's name as ``sync`` does; the command ``status``
suggests for held deletions, run exactly as printed. The commands run for real
(``CliRunner`` in this process); state dirs are filled by a real engine with fake
vectors (ids and payload do not depend on them).
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ingestd.daemon.cli.main import cli
from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from tests.gitrepos import HistoryRepo
from tests.gitserver import GitDaemon, free_port
from tests.helpers import copy_tree, fake_vectors

PAGES = (
    "docs/collector/quick-start.md",
    "docs/collector/deploy/gateway.md",
    "docs/concepts/signals/traces.md",
    "docs/concepts/glossary.md",
    "docs/languages/python/exporters.md",
    "docs/collector/architecture.md",
)


def _cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _git_config(tmp: Path, url: str, refs: str = "[main, 'v*']") -> Path:
    f = tmp / "notes.yaml"
    f.write_text(f"sources:\n  - {{kind: git, name: book, url: '{url}', refs: {refs}}}\n")
    return f


# -- the config check of a git source ---------------------------------------------------------


def test_a_dry_run_checks_a_git_source_answers_and_fetches_nothing(tmp_path: Path) -> None:
    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.tag("v1")
    repo.next_commit()
    repo.tag("v2")
    repo.push()
    state = tmp_path / "fresh-state"
    with GitDaemon(tmp_path / "repos" / "book") as server:
        cfg = _git_config(tmp_path, server.url("origin.git"))
        res = _cli("resync", "--dry-run", "--config", str(cfg), "--state-dir", str(state))
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]  # the summary: the docs' recipe pipes to `head -1`
    assert first.startswith("book: repository ") and first.endswith(
        "answers; 3 version(s) to index: main, v1, v2. A dry run fetches nothing: the first "
        "fetch (ingestd sync, or the daemon) indexes them"
    )
    assert "root folder" not in res.output and "not fetched" not in res.output
    assert not (state / "git").exists()  # no mirror: nothing was fetched


def test_a_dry_run_of_a_git_source_that_cannot_be_listed_exits_1_and_says_why(
    tmp_path: Path,
) -> None:
    cfg = _git_config(tmp_path, f"git://127.0.0.1:{free_port()}/nothing.git")
    res = _cli("resync", "--dry-run", "--config", str(cfg), "--state-dir", str(tmp_path / "s"))
    assert res.exit_code == 1, res.output
    assert res.output.startswith("book: nothing planned: repository git://")
    assert "cannot be listed: git ls-remote failed" in res.output.splitlines()[0]
    assert "root folder" not in res.output


def test_a_dry_run_of_a_git_source_whose_refs_select_nothing_exits_1(tmp_path: Path) -> None:
    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.push()
    cfg = tmp_path / "notes.yaml"
    source = f"{{kind: git, name: book, url: '{repo.origin}', refs: [trunk]}}"
    cfg.write_text(f"sources:\n  - {source}\n")
    res = _cli("resync", "--dry-run", "--config", str(cfg), "--state-dir", str(tmp_path / "s"))
    assert res.exit_code == 1, res.output
    assert "has no branch or tag that refs [trunk] selects" in res.output


def test_a_git_source_waiting_for_its_first_fetch_is_no_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The daemon plans every source at start, a git source before its first fetch."""
    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.push()
    cfg = load_config(_git_config(tmp_path, str(repo.origin)))
    eng = Engine(cfg, tmp_path / "state", embed_model=fake_vectors)
    try:
        with caplog.at_level(logging.INFO, logger="ingestd"):
            plan = eng.plan("book")
        assert plan.root_missing and "not fetched yet" in str(plan.why_missing)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("not fetched yet" in r.getMessage() for r in caplog.records)
    finally:
        eng.close()


# -- resync by name, and the command status suggests --------------------------------------------


def _held(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A folder source ``docs`` whose deletion of 5 of its 6 pages the guard holds."""
    root = copy_tree(tmp_path / "docs", PAGES)
    cfg = tmp_path / "ingestd.yaml"
    cfg.write_text(f"mass_delete: {{min_count: 2}}\nsources:\n  - name: docs\n    root: {root}\n")
    state = tmp_path / "state"
    eng = Engine(load_config(cfg), state, embed_model=fake_vectors)
    try:
        eng.sync("docs")
        for rel in PAGES[1:]:
            (root / rel).unlink()
        assert len(eng.sync("docs").held) == 5
    finally:
        eng.close()
    return root, cfg, state


def test_resync_takes_a_source_name_as_sync_does(tmp_path: Path) -> None:
    _, cfg, state = _held(tmp_path)
    common = ["--config", str(cfg), "--state-dir", str(state)]
    res = _cli("resync", *common, "--allow-mass-delete", "docs")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("docs: 0 indexed, 5 deleted")
    unknown = _cli("resync", *common, "book")
    assert unknown.exit_code == 2
    assert "unknown source(s): book; known sources: docs" in unknown.output


@pytest.mark.parametrize("flags", [["--config"], ["--config", "--state-dir"]])
def test_the_command_status_gives_for_held_deletions_works_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str]
) -> None:
    root, cfg, state = _held(tmp_path)
    cfg.write_text(cfg.read_text() + f"state_dir: {state}\n")
    given = {"--config": str(cfg), "--state-dir": str(state)}
    monkeypatch.chdir(tmp_path / "docs" / "docs")  # anywhere: the command names its files
    status = _cli("status", *[x for f in flags for x in (f, given[f])])
    assert "5 held deletions" in status.output, status.output
    (command,) = re.findall(r"deletions held by the mass-deletion guard: `([^`]+)`", status.output)
    argv = shlex.split(command)
    assert argv[:2] == ["ingestd", "resync"] and argv[-2:] == ["--allow-mass-delete", "docs"]
    res = _cli(*argv[1:])
    assert res.exit_code == 0, res.output
    st = json.loads(_cli("status", "--state-dir", str(state), "--json").stdout)
    (docs,) = st["sources"]
    assert (docs["documents"], docs["held_deletes"]) == (1, 0)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")) == [PAGES[0]]


def test_a_git_source_shows_its_repository_not_its_mirror(tmp_path: Path) -> None:
    """With two versions sharing every point (status without a daemon once counted a
    shared point once per version, and called the store damaged)."""
    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.tag("v1")
    repo.push()
    cfg = _git_config(tmp_path, str(repo.origin))
    state = tmp_path / "state"
    eng = Engine(load_config(cfg), state, embed_model=fake_vectors)
    try:
        eng.context.source("book").refresh()  # type: ignore[attr-defined]
        eng.sync("book")
    finally:
        eng.close()
    common = ["--config", str(cfg), "--state-dir", str(state)]
    status = _cli("status", *common)
    assert status.exit_code == 0, status.output
    assert f"  repository: {repo.origin}\n" in status.output, status.output
    assert str(state / "git") not in status.output
    sources = _cli("sources", *common)
    assert sources.output.startswith(f"book\t{repo.origin}\t"), sources.output
    (book,) = json.loads(_cli("status", *common, "--json").stdout)["sources"]
    assert book["url"] == str(repo.origin)
