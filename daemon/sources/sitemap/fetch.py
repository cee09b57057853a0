"""One fetch of a sitemap source: its sitemaps walked, its pages fetched into its folder.

:class:`SiteFetch` reads the sitemap and the sitemaps it names (:meth:`SiteFetch.walk`),
keeps the pages on the same host that the filter accepts, the first ``max_pages``, and
fetches those that may have changed and ``robots.txt`` allows into the pages folder
(:meth:`SiteFetch.pages`), ``concurrency`` requests at a time: see
:mod:`~ingestd.daemon.sources.sitemap.reader` for what is downloaded, kept, deleted and
skipped. Answers are settled in the sitemap's order whatever order they arrive in, so
which page is kept at a path, and the record, never depend on the network's timing. It
writes page files only; the record of the fetch is the source's.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.sources.sitemap.client import Page, SiteClient, SiteError, answered, redact
from ingestd.daemon.sources.sitemap.config import SitemapSourceConfig
from ingestd.daemon.sources.sitemap.parse import (
    MAX_SITEMAP_BYTES,
    Sitemap,
    SitemapEntry,
    SitemapFormatError,
    parse_sitemap,
)
from ingestd.daemon.sources.sitemap.paths import another_host, named_suffix, page_path, suffix_for
from ingestd.daemon.sources.sitemap.robots import Pacer, SiteRobots
from ingestd.daemon.statedir import make_private_dir

__all__ = ["MAX_SITEMAPS", "FetchResult", "SiteFetch"]

#: Most sitemaps read in one fetch (an index and the sitemaps it names, nested).
MAX_SITEMAPS = 1000

#: What to do about a page listed on another host.
_OWN_SOURCE = "give the sitemap of that host as a source of its own"

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass
class FetchResult:
    """What one fetch of the pages found.

    Attributes:
        pages: the pages kept: path -> ``url``, ``lastmod``, ``etag``, ``last_modified``,
            ``content_type``.
        errors: pages whose fetch failed (their last copy kept): URL -> why.
        skipped: pages skipped: URL -> the note.
        robots_errors: ``robots.txt`` files that could not be read: their URL -> why
            (no page of their site was asked for; the last copies are kept).
        written: page files written (new or changed).
        downloaded: page bodies downloaded.
        most_in_flight: the most page requests allowed in flight at once
            (``concurrency``, or 1 under a ``Crawl-delay``).
    """

    pages: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    robots_errors: dict[str, str] = field(default_factory=dict)
    written: int = 0
    downloaded: int = 0
    most_in_flight: int = 1


@dataclass(frozen=True, slots=True)
class _Ask:
    """A page to ask the site for: its entry, and its copy kept (``rel``, ``info``)."""

    entry: SitemapEntry
    rel: str
    info: dict[str, Any]


def in_order(fn: Callable[[_T], _R], items: Iterable[_T], workers: int) -> Iterator[tuple[_T, _R]]:
    """``(item, fn(item))`` for each of ``items``, in their order, ``fn`` on ``workers`` threads.

    At most ``2 * workers`` items are taken ahead of the one yielded, so the answers
    waiting for their turn stay few (memory stays bounded).

    Raises:
        Exception: what ``fn`` raised, at its item.
    """
    if workers <= 1:
        for item in items:
            yield item, fn(item)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="ingestd-sitemap")
    try:
        todo = iter(items)
        window: deque[tuple[_T, Future[_R]]] = deque()
        for item in todo:
            window.append((item, pool.submit(fn, item)))
            if len(window) >= 2 * workers:
                break
        while window:
            item, future = window.popleft()
            result = future.result()
            for more in todo:
                window.append((more, pool.submit(fn, more)))
                break
            yield item, result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class SiteFetch:
    """Fetches the pages of one sitemap source into ``pages_dir``.

    Args:
        config: the source's configuration.
        pages_dir: the folder the pages are kept in, at their paths.
        filter: which paths are documents (``include``/``exclude``).
    """

    def __init__(self, config: SitemapSourceConfig, pages_dir: Path, filter: SourceFilter) -> None:
        self.config = config
        self.url = config.url
        self.pages_dir = pages_dir
        self.filter = filter

    def _sitemap(self, client: SiteClient, url: str) -> Sitemap:
        page = client.get(url, max_bytes=MAX_SITEMAP_BYTES)
        if page.status != 200 or page.too_large:
            why = "over the size limit" if page.too_large else answered(page.status)
            error = SiteError(f"sitemap {redact(url)}: {why}")
            error.transient = False
            raise error
        try:
            sitemap = parse_sitemap(page.body)
        except SitemapFormatError as exc:
            why = str(exc)
            if exc.html:
                parts = urlsplit(redact(url))
                why += (
                    f": give the sitemap's URL, often {parts.scheme}://{parts.netloc}/sitemap.xml"
                )
            error = SiteError(f"sitemap {redact(url)}: {why}")
            error.transient = False
            raise error from None
        return sitemap

    def walk(self, client: SiteClient) -> tuple[list[SitemapEntry], dict[str, str]]:
        """The pages the sitemap (and the sitemaps it names) lists, and the entries skipped.

        Raises:
            SiteError: a sitemap could not be fetched or read.
        """
        queue = deque([self.url])
        seen = {self.url}
        pages: list[SitemapEntry] = []
        skipped: dict[str, str] = {}
        while queue:
            sitemap = self._sitemap(client, queue.popleft())
            if sitemap.kind == "urlset":
                pages.extend(sitemap.entries)
                continue
            for e in sitemap.entries:
                elsewhere = another_host(e.loc, self.url)
                if elsewhere:
                    skipped[e.loc] = f"{elsewhere}: a sitemap of another host is not followed"
                elif len(seen) >= MAX_SITEMAPS:
                    skipped[e.loc] = f"past the {MAX_SITEMAPS} sitemaps read in one fetch"
                elif e.loc not in seen:
                    seen.add(e.loc)
                    queue.append(e.loc)
        return self._selected(pages, skipped), skipped

    def _selected(self, pages: list[SitemapEntry], skipped: dict[str, str]) -> list[SitemapEntry]:
        """The pages to fetch: on the site, at a path that can be kept, not excluded.

        At most ``max_pages`` of them, in the sitemap's order; the others are noted in
        ``skipped``.
        """
        out: list[SitemapEntry] = []
        seen: set[str] = set()
        limit = self.config.max_pages
        for e in pages:
            if e.loc in seen:
                continue
            seen.add(e.loc)
            elsewhere = another_host(e.loc, self.url)
            if elsewhere:
                skipped[e.loc] = f"{elsewhere}: {_OWN_SOURCE}"
                continue
            try:
                guess = page_path(e.loc)
            except ValueError as exc:
                skipped[e.loc] = str(exc)
                continue
            if named_suffix(e.loc) and not self.filter.accepts(guess):
                continue  # include/exclude leave it out, like a file of a folder
            if len(out) >= limit:
                skipped[e.loc] = f"past max_pages ({limit})"
                continue
            out.append(e)
        return out

    def pages(
        self,
        client: SiteClient,
        entries: list[SitemapEntry],
        before: dict[str, dict[str, Any]],
        robots: SiteRobots,
    ) -> FetchResult:
        """Fetch the pages of ``entries`` that may have changed since ``before`` (path -> info).

        Each page's site's ``robots.txt`` is read first (``robots``): a page it
        disallows is skipped with a note (a copy kept leaves, as a page gone from the
        sitemap does); when it could not be read, no page of that site is asked for and
        those kept stay. The others are asked for ``concurrency`` at a time (one at a
        time, ``Crawl-delay`` apart, when the file sets one) and settled in
        ``entries``' order.
        """
        got = FetchResult()
        known = {info["url"]: (rel, info) for rel, info in before.items()}
        asks: list[_Ask] = []
        delay = 0.0
        for e in entries:
            rel, info = known.get(e.loc, ("", {}))
            if not (rel and self.filter.accepts(rel) and (self.pages_dir / rel).is_file()):
                rel, info = "", {}  # no copy kept (or one the filter now leaves out)
            rules = robots.of(e.loc)
            if rules.unavailable is not None:
                got.robots_errors[rules.url] = rules.unavailable
                if rel:
                    got.pages[rel] = info  # not asked for this time: its last copy stays
                continue
            if not rules.allows(client.user_agent, e.loc):
                got.skipped[e.loc] = f"disallowed by {rules.url}"
                continue
            if rel and e.lastmod and info.get("lastmod") == e.lastmod:
                got.pages[rel] = info  # the sitemap says it did not change
                continue
            delay = max(delay, rules.crawl_delay(client.user_agent) or 0.0)
            asks.append(_Ask(e, rel, info))
        got.most_in_flight = 1 if delay else self.config.concurrency
        pacer = Pacer(delay)

        def ask(a: _Ask) -> Page | str:
            pacer.wait()
            try:
                return client.get(
                    a.entry.loc,
                    etag=a.info.get("etag"),
                    last_modified=a.info.get("last_modified"),
                    max_bytes=self.config.max_page_bytes,
                )
            except SiteError as exc:
                return exc.why or str(exc)

        for a, answer in in_order(ask, asks, got.most_in_flight):
            self._settle(a, answer, got)
        return got

    def _settle(self, a: _Ask, answer: Page | str, got: FetchResult) -> None:
        """Record what the site answered for ``a`` (a page, or why it did not answer)."""
        e, rel, info = a.entry, a.rel, a.info
        status = answer.status if isinstance(answer, Page) else None
        if isinstance(answer, Page) and status == 200:
            self._keep(e, answer, got)
        elif status in (404, 410):  # gone from the site: deleted, and noted
            got.skipped[e.loc] = f"listed in the sitemap, but {answered(status)}"
        elif status == 304 and rel:
            got.pages[rel] = {**info, "lastmod": e.lastmod}
        else:  # no answer, or a 401, 403, ...: the last good copy is kept
            got.errors[e.loc] = answer if isinstance(answer, str) else answered(answer.status)
            if rel:
                got.pages[rel] = info

    def _keep(self, e: SitemapEntry, page: Page, got: FetchResult) -> None:
        """Keep a page that answered 200 (or note why not)."""
        got.downloaded += 1
        suffix = suffix_for(page.content_type)
        elsewhere = another_host(page.url, self.url)
        if elsewhere:
            got.skipped[e.loc] = f"redirected to another host ({redact(page.url)})"
            return
        if page.too_large:
            got.skipped[e.loc] = f"over max_page_bytes ({self.config.max_page_bytes} bytes)"
            return
        if suffix is None:
            got.skipped[e.loc] = f"content type {page.content_type or '(none)'} is not a document"
            return
        rel = page_path(e.loc, suffix)
        if not self.filter.accepts(rel):
            return
        if rel in got.pages:
            got.skipped[e.loc] = f"kept at the same path ({rel}) as {got.pages[rel]['url']}"
            return
        try:
            got.written += self._write(rel, page.body)
        except OSError as exc:
            got.errors[e.loc] = f"cannot be kept at {rel}: {exc.strerror or exc}"
            return
        got.pages[rel] = {
            "url": e.loc,
            "lastmod": e.lastmod,
            "etag": page.etag,
            "last_modified": page.last_modified,
            "content_type": page.content_type,
        }

    def _write(self, rel: str, body: bytes) -> int:
        """Write page ``rel`` unless it holds ``body`` already; 1 when written, else 0."""
        target = self.pages_dir / rel
        try:
            if target.stat().st_size == len(body) and target.read_bytes() == body:
                return 0
        except OSError:
            pass
        make_private_dir(target.parent)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".ingestd-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(body)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return 1

    def remove(self, rel: str) -> None:
        """Delete page ``rel``, and the folders it leaves empty."""
        target = self.pages_dir / rel
        target.unlink(missing_ok=True)
        for folder in target.parents:
            if folder == self.pages_dir or self.pages_dir not in folder.parents:
                break
            try:
                folder.rmdir()
            except OSError:
                break
