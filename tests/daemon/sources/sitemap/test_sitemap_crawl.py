"""A sitemap source crawls politely: robots.txt, Crawl-delay, a few requests at a time.

Against the real ``http.server`` on loopback (an HTTPS twin on the same port for the
scheme rule): ``robots.txt`` is read once per fetch and origin with the kind's own
``User-Agent``, a page it disallows is skipped (deleted when kept), a ``robots.txt``
that answers 5xx fetches no page and keeps every copy; ``Crawl-delay`` makes requests
one at a time and that far apart (counted on a fake clock, never timed); otherwise
``concurrency`` requests overlap (counted by the server), and what is kept does not
depend on the order the answers arrive in. After each fetch the store equals a
from-scratch ingest of the pages kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trustme

from ingestd.daemon.sources.sitemap.robots import MAX_CRAWL_DELAY_S, Pacer
from ingestd.daemon.sources.sitemap.shown import STATE_FILE
from tests.daemon.sources.sitemap.site import Served, Site, as_html, small_pages, urlset
from tests.daemon.sources.sitemap.test_sitemap_source import (
    PATHS,
    _fetch_sync,
    _kept,
    _paths,
    _scratch,
)
from tests.helpers import store_snapshot, without_provenance

ROBOTS = (
    "# ingestd's own group applies, not the stricter one of every crawler\n"
    "User-agent: ingestd\nDisallow: /docs/usage.html\n\n"
    "User-agent: *\nDisallow: /\n"
)


def _record(source: Any) -> dict[str, Any]:
    return dict(json.loads((source.root / STATE_FILE).read_text()))


def test_robots_txt_is_read_once_per_fetch_and_a_disallowed_page_leaves(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with Site() as site:
        site.publish(small_pages())
        _fetch_sync(state, site)  # no robots.txt (404): every page is allowed
        assert _paths(state) == PATHS
        assert site.headers_seen["User-Agent"].startswith("ingestd/")
        site.pages["/robots.txt"] = Served(ROBOTS.encode(), "text/plain")
        site.requests.clear()
        res, source, error = _fetch_sync(state, site)
        assert error is None and (res.indexed, res.deleted) == (0, 1)
        assert site.requests["/robots.txt"] == 1 and site.requests["/docs/usage.html"] == 0
        url = f"{site.base}/docs/usage.html"
        assert _record(source)["skipped"] == {url: f"disallowed by {site.base}/robots.txt"}
        kept = PATHS - {"docs/usage.html"}
        dry = source.dry_run()  # a dry run counts what robots.txt allows
        assert dry["remote_pages"] == 3
        assert dry["dry_run_note"].startswith(
            f"sitemap {site.base}/sitemap.xml answers; 3 page(s) to fetch (1 disallowed by "
            "robots.txt). "
        )
        assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, _kept(site, kept))
        # a site of one's own: robots: false reads no robots.txt, and the page is back
        site.requests.clear()
        res, _, _ = _fetch_sync(state, site, robots=False)
        assert res.indexed == 1 and site.requests["/robots.txt"] == 0
        assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, _kept(site))
        # robots.txt answers 503: no page is asked for, and every copy stays
        indexed = store_snapshot(state)
        site.pages["/robots.txt"] = Served(b"busy", "text/plain", status=503)
        site.requests.clear()
        res, source, error = _fetch_sync(state, site)
        assert error is None and (res.indexed, res.deleted) == (0, 0)
        assert not [p for p in site.requests if p.startswith("/docs/")]
        assert store_snapshot(state) == indexed
        robots = f"{site.base}/robots.txt"
        why = f"GET {robots}: the site answered 503 Service Unavailable"
        assert _record(source)["robots_errors"] == {robots: why}
        assert f"({robots} cannot be read now: no page would be asked for)" in str(
            source.dry_run()["dry_run_note"]
        )
        assert (
            _status_text(state).count(
                f"\n  ROBOTS.TXT FAILING {robots}: {why}; no page of its site was asked for, "
                "the last copies are kept\n"
            )
            == 1
        )


def _status_text(state: Path) -> str:
    import time

    from ingestd.daemon.cli.shared.state import manifest_reader
    from ingestd.daemon.commands.status import local_status
    from ingestd.daemon.commands.status_text import status_lines

    with manifest_reader(None, state) as m:
        st = local_status(m, state)
    return "\n".join(status_lines(st, time.time())) + "\n"


class _Clock:
    """A monotonic clock that moves only when slept on; it records each wait (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def test_crawl_delay_makes_requests_one_at_a_time_that_far_apart_at_most_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(Pacer, "clock", clock.clock)
    monkeypatch.setattr(Pacer, "sleep", clock.sleep)
    with Site() as site:
        site.publish(small_pages())
        site.pages["/robots.txt"] = Served(b"User-agent: *\nCrawl-delay: 3600\n", "text/plain")
        res, source, error = _fetch_sync(tmp_path / "state", site, concurrency=8)
    assert error is None and res.indexed == 4, (error, res, _record(source))
    assert site.most_in_flight == 1  # one at a time, concurrency 8 notwithstanding
    assert clock.waits == [MAX_CRAWL_DELAY_S] * 3  # between the 4 requests, the bound's


def _many_pages(n: int) -> dict[str, Served]:
    return {
        f"/docs/page-{i}.html": Served(as_html(f"# Page {i}\n\nThe text of page {i}.\n", f"{i}"))
        for i in range(n)
    }


def test_pages_are_fetched_concurrency_at_a_time_whatever_order_they_answer_in(
    tmp_path: Path,
) -> None:
    with Site() as site:
        pages = _many_pages(6)
        site.publish(pages)
        # two URLs kept at one path: the first listed wins though it answers last
        site.pages["/docs/page-0.html"] = Served(
            pages["/docs/page-0.html"].body, after="/docs/page-0"
        )
        site.pages["/docs/page-0"] = Served(b"<p>the second of one path</p>")
        first, *rest = pages
        listed = [first, "/docs/page-0", *rest]  # in flight together (concurrency 3)
        site.pages["/sitemap.xml"] = Served(urlset(site.base, listed), "application/xml")
        site.hold_until = 3  # each page waits until 3 are in flight at once
        res, source, error = _fetch_sync(tmp_path / "state", site, concurrency=3)
        assert error is None and res.indexed == 6
        assert site.most_in_flight == 3  # they overlapped, and never more than 3
        assert site.timed_out == 0  # the first listed answered after the second
        record = _record(source)
        assert record["pages"]["docs/page-0.html"]["url"] == f"{site.base}/docs/page-0.html"
        assert record["skipped"] == {
            f"{site.base}/docs/page-0": "kept at the same path (docs/page-0.html) as "
            f"{site.base}/docs/page-0.html"
        }
        files = {f"docs/page-{i}.html": pages[f"/docs/page-{i}.html"].body for i in range(6)}
        assert without_provenance(store_snapshot(tmp_path / "state")) == _scratch(tmp_path, files)
        # one at a time, the record and the mirror are the same
        site.hold_until = None
        site.most_in_flight = 0
        _, one, _ = _fetch_sync(tmp_path / "one", site, concurrency=1)
        assert site.most_in_flight == 1
        assert _record(one)["pages"] == record["pages"]
        assert _record(one)["skipped"] == record["skipped"]


def test_an_https_page_of_an_http_sitemap_is_kept_and_www_is_another_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    with Site(ca) as site:
        pages = small_pages()
        site.pages.update(pages)
        http, https = f"http://localhost:{site.port}", f"https://localhost:{site.port}"
        xml = urlset(https, list(pages)).replace(
            b"</urlset>", f"<url><loc>http://www.localhost:{site.port}/a.html</loc></url>"
            "</urlset>".encode()
        )  # fmt: skip
        site.pages["/sitemap.xml"] = Served(xml, "application/xml")
        state = tmp_path / "state"
        res, source, error = _fetch_sync(state, site, url=f"{http}/sitemap.xml")
    assert error is None and res.indexed == 4 and _paths(state) == PATHS
    assert site.tls_requests == 5  # the 4 pages and their origin's robots.txt
    assert site.requests["/robots.txt"] == 1  # the http origin's is not needed
    assert _record(source)["skipped"] == {
        f"http://www.localhost:{site.port}/a.html": f"listed on www.localhost:{site.port}, "
        f"the sitemap is on localhost:{site.port}: give the sitemap of that host as a "
        "source of its own"
    }
