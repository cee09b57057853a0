"""A sitemap source in a running daemon: fetched at start-up, then every ``poll_s``.

The daemon fetches the site in a thread of its own and indexes its pages; a page
edited on the site is searchable after the next scheduled fetch, with nobody asking
(no event announces it); a page removed from the sitemap leaves the index. With the
real model, ``ingestd resync`` fetches once and ``ingestd search`` finds the page.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ingestd.daemon.commands.status_text import format_when, status_lines
from tests.daemon.harness import Harness
from tests.daemon.sources.sitemap.site import Served, Site, as_html, small_pages
from tests.helpers import CountingEmbedder, fake_vectors, run_cli, wait_for

NEW_TEXT = "The quokka exporter batches spans every forty seconds before it sends them."


@pytest.mark.timeout(300)
def test_the_daemon_fetches_the_site_again_every_poll_s(tmp_path: Path) -> None:
    with Site() as site:
        pages = small_pages()
        site.publish(pages)
        config = tmp_path / "ingestd.yaml"
        config.write_text(
            "sources:\n"
            f"  - {{kind: sitemap, name: site, url: '{site.base}/sitemap.xml', poll_s: 1}}\n"
        )
        with Harness(
            tmp_path, tmp_path / "state", CountingEmbedder(fake_vectors), config_path=config
        ) as h:

            def paths() -> set[str]:
                return {p["path"] for p in h.points().values()}

            wait_for(lambda: len(paths()) == 4, 60, "the first fetch to be indexed")
            pages["/docs/usage.html"] = Served(as_html(f"# Usage\n\n{NEW_TEXT}\n", "Usage"))
            del pages["/docs/notes"]
            site.publish(pages)
            wait_for(
                lambda: (
                    any(NEW_TEXT in p["text"] for p in h.points().values())
                    and "docs/notes.md" not in paths()
                ),
                60,
                "a scheduled fetch to bring the edit and the removal",
            )
            assert h.settle().clean
            (entry,) = h.service.status()["sources"]
            assert entry["pages"] == 3 and entry["fetched_at"] and not entry["failing_since"]


@pytest.mark.timeout(300)
def test_the_daemon_shows_a_sitemap_never_fetched_failing_once(tmp_path: Path) -> None:
    with Site() as site:
        config = tmp_path / "ingestd.yaml"
        config.write_text(
            "sources:\n"
            f"  - {{kind: sitemap, name: gone, url: '{site.base}/gone.xml', retries: 0}}\n"
        )
        with Harness(
            tmp_path, tmp_path / "state", CountingEmbedder(fake_vectors), config_path=config
        ) as h:
            st = wait_for(
                lambda: (s := h.service.status())["sources"][0].get("failing_since") and s,
                60,
                "the first fetch to fail",
            )
    now = time.time()
    (gone,) = st["sources"]
    lines = list(status_lines(st, now))
    at = lines.index("gone -> collection ingestd")
    assert lines[at + 1 : at + 4] == [
        f"  sitemap: {site.base}/gone.xml",
        f"  NOT FETCHED: failing since {format_when(gone['failing_since'], now)}: sitemap "
        f"{site.base}/gone.xml: the site answered 404 Not Found; nothing is synced or "
        "deleted, retried with back-off",
        "  0 page(s) kept, 0 skipped, 0 failing",
    ]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_resync_fetches_the_site_and_search_finds_its_page_with_the_real_model(
    tmp_path: Path,
) -> None:
    with Site() as site:
        pages = small_pages()
        pages["/docs/exporter/"] = Served(
            as_html(f"# The quokka exporter\n\n{NEW_TEXT}\n", "Quokka exporter")
        )
        site.publish(pages)
        state = tmp_path / "state"
        config = tmp_path / "ingestd.yaml"
        config.write_text(
            f"state_dir: {state}\nsources:\n"
            f"  - {{kind: sitemap, name: site, url: '{site.base}/sitemap.xml', retries: 0}}\n"
        )
        done = run_cli("resync", "--config", str(config), timeout=400, check=True)
        assert done.stdout.startswith("site: 5 indexed, 0 deleted, 0 failed;"), done.stdout
    hits = json.loads(
        run_cli(
            "search", "--config", str(config), "--json", "-k", "3",
            "how often does the quokka exporter send spans?", check=True,
        ).stdout
    )  # fmt: skip
    assert hits[0]["path"] == "docs/exporter/index.html" and NEW_TEXT in hits[0]["text"]
    assert hits[0]["source"] == "site" and hits[0]["chunker"] == "html"
    # the site is gone: resync keeps every page and says so with exit 1 (a cron job sees it)
    failed = run_cli("resync", "--config", str(config), timeout=400)
    assert failed.returncode == 1, (failed.stdout, failed.stderr)
    assert failed.stdout.startswith("site: 0 indexed, 0 deleted, 0 failed;"), failed.stdout
    assert "the fetch failed, synced from the last copy: " in failed.stderr
    kept = json.loads(
        run_cli("search", "--config", str(config), "--json", "-k", "1", NEW_TEXT, check=True).stdout
    )
    assert kept[0]["path"] == "docs/exporter/index.html"
