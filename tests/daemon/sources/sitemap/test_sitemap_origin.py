"""A sitemap source speaks of its site, never of the folder its pages are kept in.

A site whose ``robots.txt`` disallows every page holds nothing: the sync's warning and
``status`` say so in the site's terms (robots.txt), not a folder's advice on include
globs. Before its first fetch ends, ``status`` names the configured URL and that the
fetch began; when it ends, the log says the site is fetched (its URL), and the web
pages show the URL, never the pages' folder.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli as main
from ingestd.daemon.commands.status import status_of
from ingestd.daemon.commands.status_text import status_lines
from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from tests.daemon.sources.sitemap.site import Served, Site, small_pages
from tests.daemon.sources.sitemap.test_sitemap_messages import _status
from tests.helpers import fake_vectors


def _engine(tmp: Path, site: Site) -> Engine:
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nA page.\n")
    sources: list[dict[str, Any]] = [
        {"name": "docs", "root": str(docs)},
        {"kind": "sitemap", "name": "site", "url": f"{site.base}/sitemap.xml", "retries": 0},
    ]
    cfg = load_config(None, overrides={"state_dir": str(tmp / "state"), "sources": sources})
    return Engine(cfg, tmp / "state", embed_model=fake_vectors)


def _wait(condition: Any) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, "not reached in 20 s"
        time.sleep(0.01)


def test_a_site_robots_txt_disallows_whole_says_so_not_folder_advice(tmp_path: Path) -> None:
    config = tmp_path / "ingestd.yaml"
    state = tmp_path / "state"
    with Site() as site:
        site.publish(small_pages())
        site.pages["/robots.txt"] = Served(b"User-agent: *\nDisallow: /\n", "text/plain")
        url = f"{site.base}/sitemap.xml"
        config.write_text(
            f"state_dir: {state}\nsources:\n"
            f"  - {{kind: sitemap, name: site, url: '{url}', retries: 0}}\n"
        )
        resync = CliRunner().invoke(main, ["resync", "--config", str(config)])
    why = (
        f"sitemap {url} lists 4 page(s), none kept: 4 disallowed by robots.txt "
        "(`ingestd status` lists them)"
    )
    assert f"source site: {why}" in resync.stderr
    st, lines = _status(state)
    (entry,) = st["sources"]
    assert entry["warnings"] == [why]
    for out in (resync.stderr, "\n".join(lines)):
        assert "include globs" not in out and "/sitemap/site-" not in out


def test_status_names_the_configured_url_and_the_first_fetch_under_way(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Site() as site:
        site.publish(small_pages())
        site.hold_until = 5  # the first page request waits until released
        eng = _engine(tmp_path, site)
        try:
            eng.sync("docs")
            eng.sync("site")  # never fetched: nothing synced, on its way
            before = list(
                status_lines(
                    status_of(eng.resources.manifest, eng, eng.resources.paths.root), time.time()
                )
            )
            source = eng.context.source("site")
            fetch = threading.Thread(target=source.refresh)
            fetch.start()
            try:
                _wait(lambda: site.in_flight)
                during = list(
                    status_lines(
                        status_of(eng.resources.manifest, eng, eng.resources.paths.root),
                        time.time(),
                    )
                )
            finally:
                site.release()
                fetch.join(30)
            with caplog.at_level(logging.INFO, logger="ingestd"):
                eng.sync("site")
        finally:
            eng.close()
        url = f"{site.base}/sitemap.xml"
    at = before.index("site -> collection ingestd")
    assert before[at + 1 : at + 3] == [
        f"  sitemap: {url}",
        "  NOT FETCHED: no fetch has begun; nothing is synced or deleted",
    ]
    at = during.index("site -> collection ingestd")
    assert during[at + 1] == f"  sitemap: {url}"
    assert during[at + 2].startswith("  NOT FETCHED: its first fetch began ")
    assert during[at + 2].endswith(" and has not finished; nothing is synced or deleted")
    assert f"source site: {url} is fetched; syncing" in caplog.messages
    assert not [m for m in caplog.messages if "/sitemap/site-" in m]
