"""A git source whose repository does not exist: the error names it in git's own words.

git prints the fault (``fatal: '/srv/repo' does not appear to be a git repository``)
and then the same advice for every failed remote (``Please make sure you have the
correct access rights and the repository exists.``); the advice must never be all a
user reads. Real git against each form of a missing repository: a relative path, a
``~/`` path, a ``file://`` URL and a ``git daemon`` that does not serve it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ingestd.daemon.cli.main import cli
from ingestd.daemon.sources.gitcmd import error_reason
from tests.gitserver import GitDaemon


def _dry_run(tmp_path: Path, url: str) -> Result:
    cfg = tmp_path / "cfg" / "notes.yaml"
    cfg.parent.mkdir(exist_ok=True)
    cfg.write_text(f"sources:\n  - {{kind: git, name: book, url: '{url}', refs: [main]}}\n")
    args = ["resync", "--dry-run", "--config", str(cfg), "--state-dir", str(tmp_path / "s")]
    return CliRunner().invoke(cli, args)


@pytest.mark.parametrize("form", ["relative", "home", "file-url"])
def test_a_missing_repository_path_is_named_as_git_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    gone = {
        "relative": tmp_path / "cfg" / "repo",
        "home": tmp_path / "home" / "repo",
        "file-url": tmp_path / "nonexist",
    }[form]
    url = {"relative": "repo", "home": "~/repo", "file-url": f"file://{gone}"}[form]
    shown = url if form == "file-url" else str(gone)  # a path is shown resolved
    res = _dry_run(tmp_path, url)
    assert res.exit_code == 1, res.output
    assert res.output.splitlines() == [  # one line: no "not fetched yet" after it
        f"book: nothing planned: repository {shown} cannot be listed: git ls-remote failed: "
        f"'{gone}' does not appear to be a git repository"
    ]


def test_a_repository_a_git_daemon_does_not_serve_is_named_as_git_names_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "repos").mkdir()
    with GitDaemon(tmp_path / "repos") as server:
        url = server.url("gone.git")
        res = _dry_run(tmp_path, url)
    assert res.exit_code == 1, res.output
    assert res.output.splitlines() == [
        f"book: nothing planned: repository {url} cannot be listed: git ls-remote failed: "
        "remote error: access denied or repository not exported: /gone.git"
    ]


def test_git_advice_and_hints_give_way_to_the_error_lines() -> None:
    err = (
        b"hint: Using 'master' as the name\n"
        b"fatal: '/srv/x' does not appear to be a git repository\n"
        b"fatal: Could not read from remote repository.\n\n"
        b"Please make sure you have the correct access rights\n"
        b"and the repository exists.\n"
    )
    assert error_reason(err) == "'/srv/x' does not appear to be a git repository"
    assert error_reason(b"error: a\nerror: b\nerror: c\n") == "a; b"
    assert error_reason(b"warning: w\nsomething odd\n") == "warning: w; something odd"
    assert error_reason(b"") == "(no message)"
