"""A git source's ``url`` in a form ingestd cannot fetch is a config error (exit 2).

Before, ``url: ftp://...`` passed validation and failed at the dry run, exit 1 (``git``:
``transport 'ftp' not allowed``), and an scp-like ``git@host:org/repo.git`` was taken
for a path relative to the config file. Every URL key of the config is checked when it
is read: a git ``url`` against the forms git reads and ingestd's transports
(``daemon/sources/gitconfig.py``), the keys of HTTP servers (a sitemap, ``qdrant.url``,
``embedding.url``) against http and https.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli import cli
from ingestd.daemon.config import ConfigError, load_config
from ingestd.daemon.sources.gitcmd import ALLOWED_PROTOCOLS
from ingestd.daemon.sources.gitconfig import ACCEPTED_FORMS
from tests.gitrepos import HistoryRepo


def _git(url: str) -> dict[str, Any]:
    return {"sources": [{"kind": "git", "name": "book", "url": url, "refs": ["main"]}]}


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/book.git", "ftp:// is not a transport ingestd fetches"),
        ("rsync://example.com/book.git", "rsync:// is not a transport ingestd fetches"),
        ("HTTPS://example.com/book.git", "HTTPS:// is not a transport ingestd fetches (git reads"),
        ("ext::sh -c touch% /tmp/x", "ext:: is a git remote helper, never run by ingestd"),
        ("fd::3", "fd:: is a git remote helper"),
        ("https:///book.git", "'https:///book.git' names no host"),
        ("file://", "'file://' names no path"),
        ("example.com:", "'example.com:' is neither a host:path nor a path"),
        (" ", "empty"),
    ],
)
def test_a_git_url_ingestd_cannot_fetch_is_a_config_error_naming_the_forms(
    url: str, why: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(None, overrides=_git(url))
    (line,) = exc.value.problems
    assert line.startswith(f"sources[0].url: {why}"), line
    assert f"expected {ACCEPTED_FORMS}" in line


def test_the_dry_run_of_an_ftp_url_exits_2_before_any_fetch(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("sources:\n  - {kind: git, name: book, url: 'ftp://h/b.git', refs: [main]}\n")
    res = CliRunner().invoke(
        cli, ["resync", "--dry-run", "--config", str(config), "--state-dir", str(tmp_path / "s")]
    )
    assert res.exit_code == 2, res.output
    assert "sources[0].url: ftp:// is not a transport ingestd fetches" in res.output
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        *((f"{p}://example.com/book.git", True) for p in ALLOWED_PROTOCOLS if p != "file"),
        ("file:///srv/git/book.git", True),
        ("ssh://git@example.com:2222/book.git", True),
        ("git+ssh://example.com/book.git", True),  # git's old names of ssh://
        ("git@github.com:org/book.git", True),  # scp-like, over ssh
        ("example.com:book.git", True),
        ("/srv/git/book.git", True),
        ("./repos/book:v2", False),  # a '/' before the ':': a path, as git reads it
        ("repos/book.git", False),
    ],
)
def test_every_form_git_fetches_is_accepted_and_only_paths_are_resolved(
    tmp_path: Path, url: str, kept: bool
) -> None:
    """URLs and scp-like addresses reach git as written (an scp-like one was made a path
    under the config's folder); a relative path is the config folder's."""
    config = tmp_path / "c.yaml"
    config.write_text(f"sources:\n  - {{kind: git, name: book, url: '{url}', refs: [main]}}\n")
    got = load_config(config).sources[0].url
    assert got == (url if kept else str(tmp_path / url))


def test_a_home_relative_path_is_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """git does not expand ``~`` and runs with a home of its own: ingestd expands it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_config(None, overrides=_git("~/book.git")).sources[0].url == str(
        tmp_path / "book.git"
    )


def test_a_file_url_and_a_relative_path_reach_a_real_repository(tmp_path: Path) -> None:
    """The accepted local forms are what git fetches: the dry run lists the refs."""
    repo = HistoryRepo(tmp_path / "repos" / "book")
    repo.push()
    for url in (f"file://{repo.origin}", os.path.relpath(repo.origin, tmp_path)):
        config = tmp_path / "c.yaml"
        config.write_text(f"sources:\n  - {{kind: git, name: book, url: '{url}', refs: [main]}}\n")
        res = CliRunner().invoke(
            cli,
            ["resync", "--dry-run", "--config", str(config), "--state-dir", str(tmp_path / "s")],
        )
        assert res.exit_code == 0, res.output
        assert "repository" in res.output and "answers" in res.output, res.output


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            {"sources": [{"kind": "sitemap", "name": "site", "url": "ftp://h/sitemap.xml"}]},
            "sources[0].url: expected an http:// or https:// URL of a sitemap",
        ),
        (
            {"qdrant": {"url": "localhost:6333"}},
            "qdrant.url: expected an http:// or https:// URL of a Qdrant server "
            "(got 'localhost:6333')",
        ),
        (
            {"embedding": {"backend": "openai", "url": "ftp://h/v1", "dimensions": 3}},
            "embedding: url: expected an http:// or https:// URL of an OpenAI-compatible "
            "endpoint (got 'ftp://h/v1')",
        ),
    ],
    ids=["sitemap", "qdrant", "embedding"],
)
def test_every_url_of_an_http_server_is_checked_when_the_config_is_read(
    data: dict[str, Any], line: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(None, overrides=data)
    assert any(p.startswith(line) for p in exc.value.problems), exc.value.problems
