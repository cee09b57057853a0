"""One fetch of a sitemap source: its sitemaps walked, its pages fetched into its folder.

:class:`SiteFetch` reads the sitemap and the sitemaps it names (:meth:`SiteFetch.walk`),
keeps the pages on the same site that the filter accepts, the first ``max_pages``, and
fetches those that may have changed into the pages folder (:meth:`SiteFetch.pages`):
see :mod:`~ingestd.daemon.sources.sitemap.reader` for what is downloaded, kept,
deleted and skipped. It writes page files only; the record of the fetch is the
source's.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.sources.sitemap.client import Page, SiteClient, SiteError, redact
from ingestd.daemon.sources.sitemap.config import SitemapSourceConfig
from ingestd.daemon.sources.sitemap.parse import (
    MAX_SITEMAP_BYTES,
    Sitemap,
    SitemapEntry,
    SitemapFormatError,
    parse_sitemap,
)
from ingestd.daemon.sources.sitemap.paths import named_suffix, page_path, same_site, suffix_for
from ingestd.daemon.statedir import make_private_dir

__all__ = ["MAX_SITEMAPS", "FetchResult", "SiteFetch"]

#: Most sitemaps read in one fetch (an index and the sitemaps it names, nested).
MAX_SITEMAPS = 1000


@dataclass
class FetchResult:
    """What one fetch of the pages found.

    Attributes:
        pages: the pages kept: path -> ``url``, ``lastmod``, ``etag``, ``last_modified``,
            ``content_type``.
        errors: pages whose fetch failed (their last copy kept): URL -> why.
        skipped: pages skipped: URL -> the note.
        written: page files written (new or changed).
        downloaded: page bodies downloaded.
    """

    pages: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    written: int = 0
    downloaded: int = 0


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
            why = "over the size limit" if page.too_large else f"the site answered {page.status}"
            error = SiteError(f"sitemap {redact(url)}: {why}")
            error.transient = False
            raise error
        try:
            sitemap = parse_sitemap(page.body)
        except SitemapFormatError as exc:
            error = SiteError(f"sitemap {redact(url)} cannot be read: {exc}")
            error.transient = False
            raise error from None
        return sitemap

    def walk(self, client: SiteClient) -> tuple[list[SitemapEntry], dict[str, str]]:
        """The pages the sitemap (and the sitemaps it names) lists, and the entries skipped."""
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
                if not same_site(e.loc, self.url):
                    skipped[e.loc] = "a sitemap on another site; not followed"
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
            if not same_site(e.loc, self.url):
                skipped[e.loc] = "a page on another site"
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
        self, client: SiteClient, entries: list[SitemapEntry], before: dict[str, dict[str, Any]]
    ) -> FetchResult:
        """Fetch the pages of ``entries`` that may have changed since ``before`` (path -> info)."""
        got = FetchResult()
        known = {info["url"]: (rel, info) for rel, info in before.items()}
        for e in entries:
            rel, info = known.get(e.loc, ("", {}))
            if not (rel and self.filter.accepts(rel) and (self.pages_dir / rel).is_file()):
                rel, info = "", {}  # no copy kept (or one the filter now leaves out)
            if rel and e.lastmod and info.get("lastmod") == e.lastmod:
                got.pages[rel] = info  # the sitemap says it did not change
                continue
            page: Page | None = None
            try:
                page = client.get(
                    e.loc,
                    etag=info.get("etag"),
                    last_modified=info.get("last_modified"),
                    max_bytes=self.config.max_page_bytes,
                )
                why = f"the site answered {page.status}"
            except SiteError as exc:
                why = str(exc)
            status = page.status if page is not None else None
            if page is not None and status == 200:
                self._keep(e, page, got)
            elif status in (404, 410):
                pass  # gone from the site: deleted
            elif status == 304 and rel:
                got.pages[rel] = {**info, "lastmod": e.lastmod}
            else:  # no answer, or a 401, 403, ...: the last good copy is kept
                got.errors[e.loc] = why
                if rel:
                    got.pages[rel] = info
        return got

    def _keep(self, e: SitemapEntry, page: Page, got: FetchResult) -> None:
        """Keep a page that answered 200 (or note why not)."""
        got.downloaded += 1
        suffix = suffix_for(page.content_type)
        if not same_site(page.url, self.url):
            got.skipped[e.loc] = f"redirected to another site ({redact(page.url)})"
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
