"""A site read through its sitemap: fetched into the state dir, synced like a folder.

A real HTTP server on loopback (:class:`~tests.daemon.sources.sitemap.site.Site`) serves
real pages; after each fetch and sync the store equals a from-scratch ingest of a
folder holding the same pages at the same paths (the oracle), and ``verify`` is clean.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from ingestd.daemon.sources.sitemap.client import SiteError
from ingestd.daemon.sources.sitemap.reader import SitemapSource
from ingestd.daemon.sources.sitemap.shown import STATE_FILE
from tests.daemon.sources.sitemap.site import (
    Served,
    Site,
    gzipped,
    sitemapindex,
    small_pages,
    urlset,
)
from tests.helpers import fake_vectors, oracle, store_snapshot, without_provenance

#: The paths the pages of :func:`small_pages` are kept at.
PATHS = {"docs/install.html", "docs/usage.html", "docs/guide/index.html", "docs/notes.md"}


def _config(state: Path, site: Site, **keys: Any) -> Any:
    source = {
        "kind": "sitemap",
        "name": "site",
        "url": f"{site.base}/sitemap.xml",
        "retries": 0,
        "timeout_s": 10,
        **keys,
    }
    return load_config(None, overrides={"state_dir": str(state), "sources": [source]})


def _fetch_sync(state: Path, site: Site, **keys: Any) -> tuple[Any, SitemapSource, str | None]:
    """Fetch the site and sync it in a fresh engine (closed after); the fetch's error, if any."""
    eng = Engine(_config(state, site, **keys), state, embed_model=fake_vectors)
    try:
        source = eng.context.source("site")
        assert isinstance(source, SitemapSource)
        error = None
        try:
            source.refresh()
        except SiteError as exc:
            error = str(exc)
        res = eng.sync("site")
        assert eng.verify("site").clean
        return res, source, error
    finally:
        eng.close()


#: The URL path of each page of :data:`PATHS`.
URLS = {
    "docs/install.html": "/docs/install.html",
    "docs/usage.html": "/docs/usage.html",
    "docs/guide/index.html": "/docs/guide/",
    "docs/notes.md": "/docs/notes",
}


def _kept(site: Site, paths: set[str] = PATHS) -> dict[str, bytes]:
    """What a from-scratch ingest should hold: the pages at ``paths`` as served now."""
    return {rel: site.pages[URLS[rel]].body for rel in paths}


def _scratch(tmp: Path, files: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    """Points of a from-scratch ingest of ``files`` as a folder source named ``site``."""
    root = tmp / f"scratch-{len(list(tmp.glob('scratch-*')))}"
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return oracle(root, tmp, fake_vectors, source="site")


def _paths(state: Path) -> set[str]:
    return {p["path"] for p in store_snapshot(state).values()}


def test_a_first_fetch_indexes_each_page_at_its_url_path_as_a_folder_would(
    tmp_path: Path,
) -> None:
    old = os.umask(0o022)  # a umask that leaves folders readable by all
    with Site() as site:
        site.publish(small_pages())
        try:
            res, source, error = _fetch_sync(tmp_path / "state", site)
        finally:
            os.umask(old)
    assert error is None and res.indexed == 4
    assert _paths(tmp_path / "state") == PATHS
    snapshot = without_provenance(store_snapshot(tmp_path / "state"))
    assert snapshot == _scratch(tmp_path, _kept(site))
    assert {p["chunker"] for p in snapshot.values()} == {"html", "markdown"}
    # the pages live in the state dir, private whatever the umask
    made = [source.root.parent, *source.root.parent.rglob("*")]
    assert len(made) == 10 and all(p.stat().st_mode & 0o077 == 0 for p in made)


def test_a_changed_page_alone_is_downloaded_and_chunked_again(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with Site() as site:
        pages = small_pages()
        lastmod = {p: "2026-01-01" for p in pages}
        site.publish(pages, lastmod)
        assert _fetch_sync(state, site)[0].indexed == 4
        before = store_snapshot(state)
        # the sitemap's <lastmod> moves for the page that changed: no other page is asked for
        pages["/docs/usage.html"] = Served(
            pages["/docs/usage.html"].body.replace(b"</main>", b"<p>A new closing word.</p></main>")
        )
        site.publish(pages, {**lastmod, "/docs/usage.html": "2026-02-01"})
        site.requests.clear()
        site.sent.clear()
        res, source, _ = _fetch_sync(state, site)
        assert dict(site.requests) == {"/sitemap.xml": 1, "/robots.txt": 1, "/docs/usage.html": 1}
        assert (res.indexed, res.deleted) == (1, 0)
        after = store_snapshot(state)
        changed = {i for i in after if i not in before} | {i for i in before if i not in after}
        assert {after.get(i, before.get(i))["path"] for i in changed} == {"docs/usage.html"}
        assert without_provenance(after) == _scratch(tmp_path, _kept(site))
        # without <lastmod>, each page is asked for with its ETag: 304, nothing downloaded
        site.publish(pages)
        site.sent.clear()
        res, source, _ = _fetch_sync(state, site)
        assert dict(site.sent) == {"/sitemap.xml": 1} and source.downloaded == 0
        assert (res.indexed, res.deleted) == (0, 0)


def test_a_page_gone_from_the_sitemap_or_answering_404_is_deleted(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with Site() as site:
        pages = small_pages()
        site.publish(pages)
        _fetch_sync(state, site)
        del pages["/docs/notes"]
        site.publish(pages)
        site.pages["/docs/usage.html"] = Served(b"gone", "text/plain", status=410)
        res, source, _ = _fetch_sync(state, site)
        assert (res.indexed, res.deleted) == (0, 2)
        assert _paths(state) == {"docs/install.html", "docs/guide/index.html"}
        assert not (source.pages_dir / "docs" / "notes.md").exists()
        kept = _kept(site, {"docs/install.html", "docs/guide/index.html"})
        assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, kept)


def test_a_failing_server_keeps_every_point_and_status_says_what_fails(tmp_path: Path) -> None:
    from ingestd.daemon.cli.shared.state import manifest_reader
    from ingestd.daemon.commands.status import local_status
    from ingestd.daemon.commands.status_text import status_lines

    state = tmp_path / "state"

    def status() -> tuple[dict[str, Any], str]:
        with manifest_reader(None, state) as m:
            st = local_status(m, state)
        return st["sources"][0], "\n".join(status_lines(st, time.time()))

    site = Site().start()
    site.publish(small_pages())
    _fetch_sync(state, site)
    indexed = store_snapshot(state)
    # one page answers 500: its last copy is kept, and listed as failing
    site.pages["/docs/usage.html"] = Served(b"oops", "text/plain", status=500)
    res, _, error = _fetch_sync(state, site)
    assert error is None and (res.indexed, res.deleted) == (0, 0)
    assert store_snapshot(state) == indexed
    entry, text = status()
    assert entry["page_errors_count"] == 1 and entry["pages"] == 4
    assert (
        f"\n  page failing {site.base}/docs/usage.html: the site answered 500 Internal Server "
        "Error; its last copy is kept\n"
    ) in text
    # the whole site answers 500: the fetch fails, nothing is deleted
    site.failing = 500
    res, _, error = _fetch_sync(state, site)
    assert error is not None and "answered 500" in error
    assert res.deleted == 0 and store_snapshot(state) == indexed
    entry, text = status()
    assert entry["failing_since"] and "FETCH FAILING since" in text
    # the server is gone: the connection is refused, nothing is deleted
    site.stop()
    res, source, error = _fetch_sync(state, site)
    assert error is not None and "no answer (ConnectError" in error
    assert res.deleted == 0 and store_snapshot(state) == indexed
    assert source.poll_s == 10.0  # a back-off while fetches fail: 5 s doubling
    assert "FETCH FAILING since" in status()[1]


def test_a_sitemap_index_names_sitemaps_plain_and_gzipped(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with Site() as site:
        pages = small_pages()
        site.pages.update(pages)
        names = list(pages)
        site.pages["/sitemap-a.xml"] = Served(urlset(site.base, names[:2]), "application/xml")
        site.pages["/sitemap-b.xml.gz"] = Served(
            gzipped(urlset(site.base, names[2:])), "application/gzip"
        )
        site.pages["/sitemap.xml"] = Served(
            sitemapindex(site.base, ["/sitemap-a.xml", "/sitemap-b.xml.gz"]).replace(
                b"</sitemapindex>", b"<sitemap><loc>https://elsewhere.example/s.xml</loc>"
            )
            + b"</sitemap></sitemapindex>",
            "application/xml",
        )
        res, source, error = _fetch_sync(state, site)
    assert error is None and res.indexed == 4 and _paths(state) == PATHS
    skipped = json.loads((source.root / STATE_FILE).read_text())["skipped"]
    assert skipped == {
        "https://elsewhere.example/s.xml": f"listed on elsewhere.example, the sitemap is on "
        f"127.0.0.1:{site.port}: a sitemap of another host is not followed"
    }


def test_what_is_not_a_page_of_the_site_is_skipped_with_a_note(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with Site() as site:
        pages = small_pages()
        pages["/docs/logo"] = Served(b"\x89PNG\r\n\x1a\n", "image/png")
        site.publish(pages)
        site.pages["/sitemap.xml"] = Served(
            urlset(site.base, list(pages)).replace(
                b"</urlset>",
                b"<url><loc>https://elsewhere.example/docs/x.html</loc></url></urlset>",
            ),
            "application/xml",
        )
        res, source, _ = _fetch_sync(state, site, max_pages=3, exclude=["docs/usage.html"])
    skipped = json.loads((source.root / STATE_FILE).read_text())["skipped"]
    assert skipped == {
        f"{site.base}/docs/logo": "past max_pages (3)",
        "https://elsewhere.example/docs/x.html": f"listed on elsewhere.example, the sitemap is "
        f"on 127.0.0.1:{site.port}: give the sitemap of that host as a source of its own",
    }
    assert _paths(state) == PATHS - {"docs/usage.html"}  # excluded, not fetched
    assert site.requests["/docs/usage.html"] == 0
    with Site() as site:
        site.publish({"/docs/logo": Served(b"\x89PNG\r\n\x1a\n", "image/png")})
        _, source, _ = _fetch_sync(tmp_path / "other", site)
    skipped = json.loads((source.root / STATE_FILE).read_text())["skipped"]
    assert skipped == {f"{site.base}/docs/logo": "content type image/png is not a document"}


def test_headers_are_sent_and_a_secret_one_is_stored_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-token-value"
    monkeypatch.setenv("DOCS_TOKEN", secret)
    state = tmp_path / "state"
    keys = {"headers": {"User-Agent": "docs-indexer"}, "headers_env": {"X-Token": "DOCS_TOKEN"}}
    with Site() as site:
        site.publish(small_pages())
        _fetch_sync(state, site, **keys)
        assert site.headers_seen["User-Agent"] == "docs-indexer"
        assert site.headers_seen["X-Token"] == secret
        monkeypatch.delenv("DOCS_TOKEN")
        _, _, error = _fetch_sync(state, site, **keys)
    assert error == "the environment variable DOCS_TOKEN (headers_env.X-Token) is not set"
    assert _paths(state) == PATHS  # nothing deleted
    for f in state.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f
    assert secret not in caplog.text


def test_a_page_the_filter_now_excludes_leaves_even_when_its_lastmod_holds(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    with Site() as site:
        pages = small_pages()
        site.publish(pages, {p: "2026-01-01" for p in pages})
        _fetch_sync(state, site)
        # /docs/notes names no suffix: only its content type makes it docs/notes.md
        res, _, _ = _fetch_sync(state, site, exclude=["*.md"])
    assert (res.indexed, res.deleted) == (0, 1)
    assert _paths(state) == PATHS - {"docs/notes.md"}
