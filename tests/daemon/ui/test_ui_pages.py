"""``ingestd ui`` over plain HTTP (Starlette's TestClient), on a state dir with no daemon.

The browser tests (``test_ui_browser.py``) drive the same pages through a running
daemon; these pin each page's content, the read-only mode and the guards.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from ingestd.daemon.cli import cli
from ingestd.daemon.config import SourceConfig
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.ui.app import create_app
from ingestd.daemon.ui.files import inside_root, manifest_prefix
from ingestd.daemon.ui.frontdoor import FrontDoor
from ingestd.daemon.ui.guard import COOKIE, guarded

PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"


def _client(base: Path, token: str | None = None) -> TestClient:
    door = FrontDoor(base / "state", config=base / "config.yaml")
    app = guarded(create_app(door), "127.0.0.1", PORT, token)
    return TestClient(app, base_url=BASE, follow_redirects=False)


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def test_the_overview_lists_each_source_with_its_counts_read_only(indexed: Path) -> None:
    page = _client(indexed).get("/")
    assert page.status_code == 200
    html = page.text
    row = html[html.index('id="source-docs"') :]
    assert re.search(r'class="num documents">4<', row)  # 3 markdown files and .env
    assert re.search(r'class="num chunks">\d+<', row)
    assert "read-only: no daemon" in html and "Sync now" not in html
    # the words of `ingestd status`, and no self-refresh with no daemon at work
    assert "4 documents (1 failed)" in html and 'http-equiv="refresh"' not in html


def test_files_say_why_each_file_is_left_out_and_how_to_change_it(indexed: Path) -> None:
    html = _client(indexed).get("/files", params={"source": "docs"}).text
    rows = dict(re.findall(r"<td>(?:<a [^>]*>)?([^<]+)(?:</a>)?</td>\s*<td[^>]*>([^<]*)<", html))
    assert rows[".env"] == "failed" and rows["install.md"] == "indexed"
    assert rows["debug.log"] == "left out" and rows["notes.txt"] == "left out"
    assert "secret-bearing file name" in html and "files.allow_secret_names" in html
    assert "excluded by the glob &#39;*.log&#39;; remove it from the source&#39;s exclude" in html
    assert "matches no include glob" in html
    assert "ignored by .gitignore (&#39;build/&#39;)" in html
    # a folder is browsed, and a file that appears meanwhile waits for the next sync
    (indexed / "docs/guide/new.md").write_text("# New\n\nnot yet indexed\n")
    try:
        sub = _client(indexed).get("/files", params={"source": "docs", "folder": "guide"}).text
    finally:
        (indexed / "docs/guide/new.md").unlink()
    assert "animals.md" in sub and "ships.md" in sub and "install.md" not in sub
    assert "not indexed yet: the next sync adds it" in sub


def test_a_file_shows_its_chunks_as_the_index_holds_them(indexed: Path) -> None:
    html = _client(indexed).get("/chunks", params={"source": "docs", "path": "install.md"}).text
    assert "rule <code>markdown</code>" in html and "chunker <code>markdown</code>" in html
    assert re.search(r"lines 1–\d+", html) and re.search(r"\d+ tokens", html)
    assert "Run pip install ingestd" in html and '<div class="heading">Install' in html
    missing = _client(indexed).get("/chunks", params={"source": "docs", "path": "nope.md"})
    assert missing.status_code == 404 and "not a document of source docs" in missing.text


def test_a_secret_files_chunk_view_reads_nothing_of_it(indexed: Path) -> None:
    page = _client(indexed).get("/chunks", params={"source": "docs", "path": ".env"})
    assert "secret-bearing file name" in page.text and "not-a-real-key" not in page.text


def test_nothing_outside_a_source_root_is_listed_or_read(indexed: Path, tmp_path: Path) -> None:
    client = _client(indexed)
    assert client.get("/files", params={"source": "docs", "folder": "../.."}).status_code == 400
    root = indexed / "docs"
    assert inside_root(root, "../state") is None and inside_root(root, "/etc") is None
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    try:
        assert inside_root(root, "escape") is None
        assert inside_root(root, "guide") == root.resolve() / "guide"
    finally:
        (root / "escape").unlink()


def test_a_search_url_answers_passages_with_their_citation(indexed: Path) -> None:
    client = _client(indexed)
    q = {"q": "axolotls lakes", "k": "3", "mode": "sparse", "budget": "200"}
    html = client.get("/search", params=q).text
    first = html[html.index('<li class="result">') :]
    assert 'href="/chunks?source=docs&amp;path=guide/animals.md#' in first
    assert ">guide/animals.md:1-3</a>" in first and "Axolotls live in the lakes" in first
    assert "passage(s)" in html and "of 200 tokens" in html
    # the filters are kept in the form, and a path filter is applied before ranking
    assert 'value="axolotls lakes"' in html and '<option value="sparse" selected>' in html
    other = client.get("/search", params={**q, "path": "install.md"}).text
    assert "guide/animals.md" not in other
    bad = client.get("/search", params={"q": "x", "path": "/etc/passwd", "mode": "sparse"})
    assert bad.status_code == 200 and 'class="problem"' in bad.text


def test_actions_need_a_daemon_and_the_pages_csrf_token(indexed: Path) -> None:
    client = _client(indexed)
    token = _csrf(_form_page(client))
    stale = client.post("/sync", data={"source": "docs", "csrf": "forged"})
    assert stale.status_code == 403 and "stale or not ours" in stale.text
    refused = client.post("/sync", data={"source": "docs", "csrf": token})
    assert refused.status_code == 409 and "read-only" in refused.text
    assert client.get("/held", params={"source": "docs"}).status_code == 409


def _form_page(client: TestClient) -> str:
    """The CSRF token as a form holds it (with no daemon no page shows a form)."""
    app: Any = client.app
    while not hasattr(app, "state"):
        app = app.app
    return f'<input name="csrf" value="{app.state.pages.csrf.token}">'


def test_a_foreign_host_or_origin_is_refused(indexed: Path) -> None:
    client = _client(indexed)
    assert client.get("/", headers={"Host": "evil.test"}).status_code == 421
    assert client.get("/", headers={"Host": "127.0.0.1:9999"}).status_code == 421
    assert client.get("/", headers={"Origin": "http://evil.test"}).status_code == 403
    assert client.get("/", headers={"Origin": "http://127.0.0.1:9999"}).status_code == 403
    assert client.get("/", headers={"Origin": BASE}).status_code == 200
    assert client.get("/", headers={"Host": f"localhost:{PORT}"}).status_code == 200


def test_a_token_is_asked_for_once_then_kept_in_a_cookie(indexed: Path) -> None:
    client = _client(indexed, token="s3cret")
    assert client.get("/").status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    wrong = client.get("/?token=nope")
    assert wrong.status_code == 303  # a wrong token sets a cookie that then fails
    assert client.get("/").status_code == 401
    link = client.get("/search?token=s3cret&q=x")
    assert link.status_code == 303 and link.headers["location"] == "/search?q=x"
    assert f"{COOKIE}=s3cret" in link.headers["set-cookie"]
    assert (
        "HttpOnly" in link.headers["set-cookie"] and "SameSite=Strict" in link.headers["set-cookie"]
    )
    assert client.get("/").status_code == 200


def test_remote_addresses_need_a_flag_and_a_token(tmp_path: Path) -> None:
    run = CliRunner().invoke
    got = run(cli, ["ui", "--state-dir", str(tmp_path), "--listen", "0.0.0.0:8765"])
    assert got.exit_code == 2 and "not a loopback address" in got.output
    got = run(cli, ["ui", "--state-dir", str(tmp_path), "--listen", "0.0.0.0:1", "--allow-remote"])
    assert got.exit_code == 2 and "other machines need a token" in got.output
    got = run(cli, ["ui", "--state-dir", str(tmp_path), "--listen", "nowhere"])
    assert got.exit_code == 2 and "is not HOST:PORT" in got.output


@pytest.mark.parametrize(
    "path",
    [
        "a.md", "notes.txt", "debug.log", "build/out.md", "guide/x.md", "node_modules/a.md",
        ".git/HEAD.md", "x.md~", ".#x.md", "sub/.venv/a.md", "keep.log", "deep/build/y.md",
    ],
)  # fmt: skip
def test_excluded_by_names_a_reason_exactly_when_the_filter_refuses(
    tmp_path: Path, path: str
) -> None:
    (tmp_path / ".gitignore").write_text("build/\n!keep.log\n")
    source = SourceConfig(
        name="s", root=tmp_path, include=("*.md", "*.log"), exclude=("debug.log",)
    )
    flt = SourceFilter(source)
    why = flt.excluded_by(path)
    assert (why is None) == flt.accepts(path), (path, why)


def test_a_versioned_sources_versions_are_its_top_folders() -> None:
    assert manifest_prefix("", versioned=True) == ""
    assert manifest_prefix("v2", versioned=True) == "v2:"
    assert manifest_prefix("v2/docs", versioned=True) == "v2:docs/"
    assert manifest_prefix("docs/api", versioned=False) == "docs/api/"


class _Working:
    """A front door whose daemon is reconciling a git source, with a migration under way."""

    state_dir = Path("/state")

    def status(self) -> dict[str, Any]:
        now = 1_700_000_000.0
        return {
            "state_dir": "/state",
            "daemon": {
                "pid": 42,
                "phase": "reconciling",
                "healthy": False,
                "problems": ["a change has waited 700 s (watch.max_lag_s is 600 s)"],
                "queue_depth": 3,
                "lag_seconds": 700.0,
                "progress": {"book": {"phase": "indexing", "docs_done": 5, "docs_total": 9}},
            },
            "sources": [
                {
                    "source": "book",
                    "root": "/state/git/book",
                    "collection": "ingestd",
                    "documents": 9,
                    "chunks": 120,
                    "pending": 4,
                    "failed": 0,
                    "held_deletes": 2,
                    "last_sync": now,
                    "url": "https://example.org/book.git",
                    "fetched_at": now,
                    "refs": [{"version": "v2.0", "ref": "refs/tags/v2.0", "commit": "1a2b" * 10}],
                }
            ],
            "migrations": [
                {
                    "collection": "ingestd",
                    "phase": "building",
                    "docs_done": 3,
                    "docs_total": 9,
                    "version": "ingestd_v2",
                    "current_version": "ingestd_v1",
                    "from": "all-MiniLM-L6-v2",
                    "to": "bge-small",
                }
            ],
        }


def test_while_the_daemon_works_the_overview_refreshes_and_shows_its_progress() -> None:
    app = guarded(create_app(_Working()), "127.0.0.1", PORT, None)  # type: ignore[arg-type]
    html = TestClient(app, base_url=BASE).get("/").text
    assert '<meta http-equiv="refresh" content="3">' in html
    assert "UNHEALTHY" in html and "a change has waited 700 s" in html
    assert "indexing book: 5/9 documents" in html  # the progress, in status's words
    assert "version <strong>v2.0</strong> (refs/tags/v2.0) at <code>1a2b1a2b1a2b</code>" in html
    assert "migration building, 3/9 documents in ingestd_v2" in html
    assert 'href="/held?source=book"' in html and "Sync now" in html


class _CountingStatus:
    def __init__(self) -> None:
        self.calls = 0

    def status(self) -> dict[str, Any]:
        self.calls += 1
        return {"calls": self.calls}


def test_pages_share_a_recent_status_and_never_show_an_older_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingestd.daemon.ui import frontdoor

    door = FrontDoor(tmp_path)
    counting = _CountingStatus()
    door.client = counting  # type: ignore[assignment]
    assert door.status() == {"calls": 1} and door.status() == {"calls": 1}
    assert counting.calls == 1  # within STATUS_MAX_AGE_S: not read again
    monkeypatch.setattr(frontdoor, "STATUS_MAX_AGE_S", 0.0)
    assert door.status() == {"calls": 2}  # past it: read now, the old one never shown
    assert door.status(fresh=True) == {"calls": 3}  # an action's page reads it anew


class _Locked:
    state_dir = Path("/state")

    def status(self) -> dict[str, Any]:
        from ingestd.daemon.wire.statelock import StateLockedError

        raise StateLockedError("state dir /state is in use by ingestd resync (pid 7)")


def test_a_failure_ingestd_explains_is_a_page_with_its_one_line() -> None:
    app = guarded(create_app(_Locked()), "127.0.0.1", PORT, None)  # type: ignore[arg-type]
    page = TestClient(app, base_url=BASE).get("/")
    assert page.status_code == 503 and "is in use by ingestd resync (pid 7)" in page.text
    assert TestClient(app, base_url=BASE).get("/nowhere").status_code == 404


class _FirstFetch(_Working):
    """A front door whose daemon is fetching a sitemap source for the first time."""

    def status(self) -> dict[str, Any]:
        st = super().status()
        st["sources"] = [
            {
                "source": "site",
                "root": "/state/sitemap/site-0123456789abcdef",
                "root_missing": True,
                "collection": "ingestd",
                "documents": 0,
                "chunks": 0,
                "pending": 0,
                "failed": 0,
                "held_deletes": 0,
                "last_sync": None,
                "sitemap": "https://example.org/sitemap.xml",
                "fetched_at": None,
                "fetch_started": 1_700_000_000.0,
                "failing_since": None,
            }
        ]
        return st


def test_the_overview_names_a_sitemaps_url_never_its_pages_folder() -> None:
    app = guarded(create_app(_FirstFetch()), "127.0.0.1", PORT, None)  # type: ignore[arg-type]
    html = TestClient(app, base_url=BASE).get("/").text
    assert "sitemap https://example.org/sitemap.xml → ingestd" in html
    assert "not fetched: its first fetch has begun" in html
    assert "/state/sitemap/" not in html and "root missing" not in html
