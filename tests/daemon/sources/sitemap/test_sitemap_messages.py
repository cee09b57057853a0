"""What a sitemap source says when it fails: each fact once, in every place it is said.

A sitemap that answers 404, and an HTML page given as the sitemap, are met by a dry
run, a resync, a sync and ``status`` (no daemon); each says the failure once, names the
sitemap once, and an HTML page is named as such with the URL to give instead. A page
of the sitemap that answers 404 is listed by ``status`` though it was never kept.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ingestd.daemon.cli.main import cli as main
from ingestd.daemon.commands.status_text import format_when, status_lines
from tests.daemon.sources.sitemap.site import Served, Site, small_pages
from tests.daemon.sources.sitemap.test_sitemap_source import _fetch_sync


def _config(tmp: Path, site: Site) -> Path:
    config = tmp / "ingestd.yaml"
    config.write_text(
        f"state_dir: {tmp / 'state'}\nsources:\n"
        f"  - {{kind: sitemap, name: gone, url: '{site.base}/sitemap.xml', retries: 0}}\n"
        f"  - {{kind: sitemap, name: home, url: '{site.base}/', retries: 0}}\n"
    )
    return config


def _status(state: Path) -> tuple[dict[str, Any], list[str]]:
    from ingestd.daemon.cli.shared.state import manifest_reader
    from ingestd.daemon.commands.status import local_status

    with manifest_reader(None, state) as m:
        st = local_status(m, state)
    return st, list(status_lines(st, time.time()))


def test_a_sitemap_never_fetched_says_its_failure_once_everywhere(tmp_path: Path) -> None:
    runner = CliRunner()
    with Site() as site:
        site.pages["/"] = Served(b"<!DOCTYPE html>\n<html lang=en><body>Home</body></html>")
        config = _config(tmp_path, site)
        base = site.base
        dry = runner.invoke(main, ["resync", "--config", str(config), "--dry-run"])
        resync = runner.invoke(main, ["resync", "--config", str(config)])
        sync = runner.invoke(main, ["sync", "gone", "--config", str(config)])
        sources = runner.invoke(main, ["sources", "--config", str(config)])
    gone = f"sitemap {base}/sitemap.xml: the site answered 404 Not Found"
    home = (
        f"sitemap {base}/: this is an HTML page, not a sitemap: give the sitemap's URL, "
        f"often {base}/sitemap.xml"
    )
    assert dry.stdout.splitlines() == [  # no "not fetched yet" after the reason
        f"gone: nothing planned: {gone}",
        f"home: nothing planned: {home}",
    ]
    assert resync.exit_code == 1
    said = [line for line in resync.stderr.splitlines() if line.startswith("  ")]  # not logs
    assert said == [
        f"  not fetched yet ({gone}): nothing synced or deleted",
        f"  not fetched yet ({home}): nothing synced or deleted",
    ]
    assert sync.stdout.splitlines() == [
        "gone: scanned; 0 document(s) written, 0 deleted, 0 failed; NOT all searchable: "
        f"not fetched yet ({gone})"
    ]
    st, lines = _status(tmp_path / "state")
    since = {s["source"]: s["failing_since"] for s in st["sources"]}
    now = time.time()
    for name, why in (("gone", gone), ("home", home)):
        at = lines.index(f"{name} -> collection ingestd")
        assert lines[at + 2] == (
            f"  NOT FETCHED: failing since {format_when(since[name], now)}: {why}; nothing "
            "is synced or deleted, retried with back-off"
        )
        assert lines[at + 3] == "  0 page(s) kept, 0 skipped, 0 failing"
    assert sources.stdout.splitlines()[1] == f"gone\t0 pages\tfetched never\tFETCH FAILING: {gone}"
    for out in (dry.stdout, "\n".join(said), sync.stdout, "\n".join(lines), sources.stdout):
        assert out.count(gone) == 1 and out.count(home) == 1 - out.startswith("gone: scanned")


def test_a_listed_page_that_answers_404_shows_in_status_though_never_kept(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    with Site() as site:
        pages = small_pages()
        site.publish(pages)
        del site.pages["/docs/usage.html"]  # listed, never there
        _, _, error = _fetch_sync(state, site)
        url = f"{site.base}/docs/usage.html"
    assert error is None
    st, lines = _status(state)
    (entry,) = st["sources"]
    assert entry["pages_skipped"] == [
        {"url": url, "note": "listed in the sitemap, but the site answered 404 Not Found"}
    ]
    assert "  3 page(s) kept, 1 skipped, 0 failing" in lines
    assert (
        f"  page skipped {url}: listed in the sitemap, but the site answered 404 Not Found" in lines
    )


def test_a_sitemap_not_tried_yet_is_shown_as_one_not_as_a_missing_folder(tmp_path: Path) -> None:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine
    from tests.helpers import fake_vectors

    state, docs = tmp_path / "state", tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nA page.\n")
    sources = [
        {"name": "docs", "root": str(docs)},
        {"kind": "sitemap", "name": "site", "url": "http://127.0.0.1:9/sitemap.xml"},
    ]
    eng = Engine(
        load_config(None, overrides={"state_dir": str(state), "sources": sources}),
        state,
        embed_model=fake_vectors,
    )
    try:
        eng.sync("docs")  # the site is registered, and never tried
    finally:
        eng.close()
    _, lines = _status(state)
    at = lines.index("site -> collection ingestd")
    assert lines[at + 1 : at + 4] == [
        "  sitemap: (its URL is in the config)",  # no config read, no daemon: not known
        "  NOT FETCHED: no fetch has begun; nothing is synced or deleted",
        "  0 page(s) kept, 0 skipped, 0 failing",
    ]
