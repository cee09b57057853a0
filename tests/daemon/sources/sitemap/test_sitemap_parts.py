"""The sitemap kind's parts: its configuration, its XML reader, its paths, its lines.

The configuration is the kind's own model (a key of another kind is refused by name);
the XML of a sitemap is read with limits (no document type, a size cap, gzip); a page's
path is its URL's; ``status``, ``sources`` and ``resync --dry-run`` say what the kind
knows, read from the state dir alone.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ingestd.daemon.config import ConfigError, load_config
from ingestd.daemon.sources.sitemap.config import SitemapSourceConfig
from ingestd.daemon.sources.sitemap.parse import (
    MAX_SITEMAP_BYTES,
    SitemapEntry,
    SitemapFormatError,
    parse_sitemap,
)
from ingestd.daemon.sources.sitemap.paths import another_host, page_path, suffix_for
from tests.daemon.sources.sitemap.site import Site, small_pages, urlset

SITE = {"kind": "sitemap", "name": "docs", "url": "https://docs.example.com/sitemap.xml"}


def _load(tmp: Path, source: dict[str, Any]) -> Any:
    return load_config(None, overrides={"state_dir": str(tmp), "sources": [source]})


def test_a_sitemap_source_is_read_by_its_own_model_with_its_defaults(tmp_path: Path) -> None:
    (src,) = _load(tmp_path, SITE).sources
    assert isinstance(src, SitemapSourceConfig)
    assert (src.poll_s, src.max_pages, src.timeout_s, src.retries) == (3600.0, 10_000, 30.0, 3)
    assert src.url == SITE["url"] and src.root == Path()  # no root on this machine
    (src,) = _load(
        tmp_path, {**SITE, "poll_s": 60, "include": ["docs/*.html"], "headers_env": {"X-Key": "K"}}
    ).sources
    assert src.poll_s == 60 and src.include == ("docs/*.html",)


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ({**SITE, "refs": ["main"]}, r"sources\[0\]\.refs: refs is a key of kind: git sources"),
        ({**SITE, "git": True}, r"sources\[0\]\.git: git is a key of kind: local sources"),
        ({**SITE, "root": "/srv/docs"}, r"sources\[0\]\.root: root is a key of kind: local"),
        ({**SITE, "gitignore": False}, r"sources\[0\]\.gitignore: gitignore is a key of"),
        ({**SITE, "max_pagez": 3}, r"sources\[0\]\.max_pagez: unknown key; check its spelling"),
        ({"root": "/tmp", "max_pages": 3}, r"sources\[0\]\.max_pages: max_pages is a key of"),
        (
            {
                "kind": "git",
                "name": "b",
                "url": "https://x/b.git",
                "refs": ["main"],
                "max_pages": 3,
            },
            r"sources\[0\]\.max_pages: max_pages is a key of kind: sitemap sources",
        ),
        ({**SITE, "url": "ftp://docs.example.com/sitemap.xml"}, r"sources\[0\]\.url: .*http://"),
        ({"kind": "sitemap", "name": "docs"}, r"a sitemap source needs url"),
        ({"kind": "sitemap", "url": SITE["url"]}, r"a sitemap source needs name"),
        ({**SITE, "max_pages": 0}, r"sources\[0\]\.max_pages: .*greater than or equal to 1"),
        ({**SITE, "headers_env": {"X-Key": "not a name"}}, r"not an environment variable"),
        ({**SITE, "headers": {"Bad Header": "x"}}, r"not a header name: 'Bad Header'"),
        (
            {**SITE, "headers": {"x-key": "a"}, "headers_env": {"X-Key": "K"}},
            r"headers and headers_env both set x-key",
        ),
    ],
)
def test_a_wrong_key_is_refused_by_name(tmp_path: Path, source: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        _load(tmp_path, source)


def test_a_sitemap_and_an_index_are_read_with_or_without_namespace_and_gzipped() -> None:
    xml = urlset("https://s", ["/a.html", "/b/"], {"/a.html": "2026-01-01"})
    expected = [SitemapEntry("https://s/a.html", "2026-01-01"), SitemapEntry("https://s/b/")]
    assert parse_sitemap(xml).entries == expected
    assert parse_sitemap(gzip.compress(xml)).entries == expected
    bare = b"<sitemapindex><sitemap><loc> https://s/1.xml </loc></sitemap></sitemapindex>"
    index = parse_sitemap(bare)
    assert index.kind == "sitemapindex" and index.entries == [SitemapEntry("https://s/1.xml")]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">]>'
            b"<urlset><url><loc>&lol;</loc></url></urlset>",
            "a document type declaration",
        ),
        (b"<html><body>not a sitemap</body></html>", "this is an HTML page, not a sitemap"),
        (b"<!DOCTYPE html>\n<html lang=en></html>", "this is an HTML page, not a sitemap"),
        (b"<feed><entry/></feed>", "the root element is feed"),
        (b"<urlset><url><loc>x</url></urlset>", "not well-formed XML"),
        (b"\x1f\x8bnot gzip at all", "not a valid gzip file"),
        (gzip.compress(b" " * (MAX_SITEMAP_BYTES + 1)), "bytes uncompressed"),
    ],
)
def test_what_is_not_a_sitemap_is_refused(data: bytes, error: str) -> None:
    with pytest.raises(SitemapFormatError, match=error):
        parse_sitemap(data)


@pytest.mark.parametrize(
    ("url", "suffix", "path"),
    [
        ("https://s/docs/install.html", ".html", "docs/install.html"),
        ("https://s/docs/", ".html", "docs/index.html"),
        ("https://s/", ".html", "index.html"),
        ("https://s/docs/install", ".html", "docs/install.html"),
        ("https://s/docs/install", ".md", "docs/install.md"),
        ("https://s/docs/v1.2", ".html", "docs/v1.2.html"),
        ("https://s/docs/a%20b.md?x=1#top", ".txt", "docs/a b.md"),
    ],
)
def test_a_page_is_kept_at_its_url_path(url: str, suffix: str, path: str) -> None:
    assert page_path(url, suffix) == path


@pytest.mark.parametrize(
    "url", ["https://s/a/../b.html", "https://s/a//b.html", "https://s/a%2F..%2F..%2Fx"]
)
def test_a_url_path_that_climbs_or_is_not_plain_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="cannot keep a page"):
        page_path(url)


@pytest.mark.parametrize(
    ("url", "sitemap", "note"),
    [
        ("https://example.com/a.html", "http://example.com/sitemap.xml", None),
        ("http://Example.com:80/a.html", "https://example.com/sitemap.xml", None),
        ("https://example.com:8443/a", "http://example.com:8443/s.xml", None),
        (
            "https://www.example.com/a",
            "https://example.com/s.xml",
            "listed on www.example.com, the sitemap is on example.com",
        ),
        (
            "https://example.com/a",
            "https://www.example.com/s.xml",
            "listed on example.com, the sitemap is on www.example.com",
        ),
        (
            "http://example.com:8080/a",
            "http://example.com/s.xml",
            "listed on example.com:8080, the sitemap is on example.com",
        ),
        (
            "https://u:pw@docs.example.org/a",
            "https://example.com/s.xml",
            "listed on docs.example.org, the sitemap is on example.com",
        ),
    ],
)
def test_a_page_is_the_sitemaps_on_its_host_in_either_scheme(
    url: str, sitemap: str, note: str | None
) -> None:
    assert another_host(url, sitemap) == note


def test_a_content_type_names_its_suffix_or_none() -> None:
    assert suffix_for("text/html; charset=utf-8") == ".html"
    assert suffix_for("Text/Markdown") == ".md"
    assert suffix_for("image/png") is None and suffix_for(None) is None


def test_status_sources_and_a_dry_run_say_what_the_kind_knows(tmp_path: Path) -> None:
    from ingestd.daemon.cli.main import cli as main

    state = tmp_path / "state"
    config = tmp_path / "ingestd.yaml"
    with Site() as site:
        site.publish(small_pages())
        config.write_text(
            f"state_dir: {state}\nsources:\n"
            f"  - {{kind: sitemap, name: site, url: '{site.base}/sitemap.xml', retries: 0}}\n"
        )
        runner = CliRunner()
        dry = runner.invoke(main, ["resync", "--config", str(config), "--dry-run"])
        assert dry.exit_code == 0, dry.output
        assert f"sitemap {site.base}/sitemap.xml answers; 4 page(s) to fetch." in dry.output
        assert site.sent["/docs/install.html"] == 0 and not state.joinpath("sitemap").exists()
        done = runner.invoke(main, ["resync", "--config", str(config)])
        assert done.exit_code == 0, done.output
        status = runner.invoke(main, ["status", "--config", str(config)])
        sources = runner.invoke(main, ["sources", "--config", str(config)])
    assert status.exit_code == 0, status.output
    assert f"site -> collection ingestd\n  sitemap: {site.base}/sitemap.xml\n" in status.output
    assert "\n  4 page(s) kept, 0 skipped, 0 failing\n" in status.output
    lines = sources.output.splitlines()
    assert lines[0] == f"site\t{site.base}/sitemap.xml\tingestd\t4 documents"
    assert lines[1].startswith("site\t4 pages\tfetched ")
