"""A git credential never reaches a command line, against a real HTTP git server.

Any process of the same machine may read another's arguments (``ps``,
``/proc/PID/cmdline``), so a credential on a command line is a credential shown to
every user. A URL with user info (``https://user:token@host/repo.git``, the usual way
to give a forge's access token) put the token in the arguments of ``git ls-remote``,
``git fetch`` and their ``git-remote-http`` helper for as long as a fetch ran. The
server here (``git http-backend`` behind a small HTTP server asking for HTTP Basic
credentials or a bearer token) looks at every process this test started while each
request waits for its answer, so the client's processes are running: their arguments
never hold the token, and the fetch authenticates.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from ingestd.daemon.sources.git import GitSource
from ingestd.daemon.sources.gitcmd import GitError, GitRunner, Login, split_login
from tests.gitrepos import HistoryRepo, git
from tests.gitserver import HttpBackend
from tests.helpers import fake_vectors, store_snapshot

TOKEN = "tok-Recognisable-7f3a9c1e5b@x"  # an "@" as tokens may hold: %40 in a URL


def _processes_below(root: int) -> dict[int, bytes]:
    """Arguments (``/proc/PID/cmdline``) of every live process descending from ``root``."""
    parent: dict[int, int] = {}
    args: dict[int, bytes] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        parent[int(entry)] = int(stat.rpartition(")")[2].split()[1])
        args[int(entry)] = cmdline

    def below(pid: int) -> bool:
        seen = set()
        while pid in parent and pid not in seen:
            seen.add(pid)
            pid = parent[pid]
            if pid == root:
                return True
        return False

    return {pid: a for pid, a in args.items() if below(pid)}


class _Watch:
    """What the processes of this test held in their arguments at each request."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def __call__(self) -> None:
        self.seen.extend(_processes_below(os.getpid()).values())

    def assert_never_holds(self, *secrets: str) -> None:
        clients = [a for a in self.seen if b"remote-http" in a]
        assert any(b"ls-remote" in a for a in self.seen), self.seen  # observed, not missed
        assert any(b"fetch" in a for a in self.seen), self.seen
        assert clients, self.seen
        for secret in secrets:
            for a in self.seen:
                assert secret.encode() not in a, a


def _origin(tmp: Path) -> HistoryRepo:
    repo = HistoryRepo(tmp / "repos", prefixes=("src/ch01-",))
    repo.push()
    git(repo.origin, "update-server-info")
    return repo


def _sync(state: Path, source: dict[str, Any]) -> int:
    """Fetch and sync ``book``; the points it holds."""
    cfg = load_config(None, overrides={"state_dir": str(state), "sources": [source]})
    eng = Engine(cfg, state, embed_model=fake_vectors)
    try:
        src = eng.context.source("book")
        assert isinstance(src, GitSource)
        src.refresh()
        eng.sync("book")
        assert eng.verify("book").clean
    finally:
        eng.close()
    return len(store_snapshot(state))


def _assert_nowhere_in(state: Path, secret: str) -> None:
    for f in state.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


def test_a_token_in_the_url_is_on_no_command_line_and_authenticates(tmp_path: Path) -> None:
    repo = _origin(tmp_path)
    watch = _Watch()
    with HttpBackend(tmp_path / "repos", "", basic=("ci-bot", TOKEN), on_request=watch) as server:
        url = server.url("origin.git").replace(
            "http://", f"http://ci-bot:{TOKEN.replace('@', '%40')}@"
        )
        state = tmp_path / "state"
        points = _sync(state, {"kind": "git", "name": "book", "url": url, "refs": ["main"]})
    assert points > 0 and repo.files()
    pair = base64.b64encode(f"ci-bot:{TOKEN}".encode()).decode()
    assert f"Basic {pair}" in server.auth_seen  # it authenticated with the URL's credential
    watch.assert_never_holds(TOKEN, TOKEN.replace("@", "%40"), pair)
    _assert_nowhere_in(state, TOKEN.replace("@", "%40"))
    _assert_nowhere_in(state, TOKEN)


def test_a_token_from_the_environment_is_on_no_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _origin(tmp_path)
    monkeypatch.setenv("INGESTD_TEST_GIT_TOKEN", TOKEN)
    watch = _Watch()
    with HttpBackend(tmp_path / "repos", TOKEN, on_request=watch) as server:
        source = {
            "kind": "git",
            "name": "book",
            "url": server.url("origin.git"),
            "refs": ["main"],
            "credentials": {"token_env": "INGESTD_TEST_GIT_TOKEN"},
        }
        assert _sync(tmp_path / "state", source) > 0
    assert f"Bearer {TOKEN}" in server.auth_seen
    watch.assert_never_holds(TOKEN)


def test_a_url_credential_is_offered_to_its_own_host_only(tmp_path: Path) -> None:
    """git's own ``credential fill`` gets it for the URL's host; another host (a
    redirect's target) gets nothing."""
    runner = GitRunner(tmp_path, login=Login("ci-bot", TOKEN, "127.0.0.1:8080"))
    out = runner.run("credential", "fill", input=b"protocol=http\nhost=127.0.0.1:8080\n\n")
    assert f"username=ci-bot\npassword={TOKEN}\n".encode() in out
    with pytest.raises(GitError) as err:
        runner.run("credential", "fill", input=b"protocol=https\nhost=elsewhere.example\n\n")
    assert TOKEN not in str(err.value)


@pytest.mark.parametrize(
    ("url", "remote", "login"),
    [
        (
            "https://ci-bot:p%40ss@git.example.com:8443/docs.git",
            "https://git.example.com:8443/docs.git",
            Login("ci-bot", "p@ss", "git.example.com:8443"),
        ),
        (  # a forge's token given as the user name
            "https://ghp_abc@github.com/o/r.git",
            "https://github.com/o/r.git",
            Login("ghp_abc", "", "github.com"),
        ),
        ("ssh://git@host.example/r.git", "ssh://git@host.example/r.git", None),
        ("ssh://git:pw@host.example/r.git", "ssh://git@host.example/r.git", None),
        ("https://git.example.com/r.git", "https://git.example.com/r.git", None),
        ("/srv/git/r.git", "/srv/git/r.git", None),
    ],
)
def test_a_url_is_fetched_without_its_user_info(url: str, remote: str, login: Any) -> None:
    assert split_login(url) == (remote, login)
