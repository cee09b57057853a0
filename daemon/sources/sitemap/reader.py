"""The sitemap source: the pages of a documentation site, listed by its sitemap.

A ``kind: sitemap`` source names a sitemap (``url``; a sitemap index, nested indexes
and gzip-compressed sitemaps are followed). :meth:`SitemapSource.refresh` fetches the
sitemap, then each page it lists on the same host (either scheme:
:func:`~ingestd.daemon.sources.sitemap.paths.another_host`) that the site's
``robots.txt`` allows (:mod:`~ingestd.daemon.sources.sitemap.robots`), up to
``max_pages``, ``concurrency`` at a time, into a folder of the state dir
(:func:`~ingestd.daemon.sources.sitemap.shown.site_dir`), each page at its path
(:mod:`~ingestd.daemon.sources.sitemap.paths`). The folder is then read like a folder
source's: a page's identity is its file's stat, and the manifest's content hashes, the
chunking rules and the readers (HTML, Markdown, ...) apply unchanged.

A page is not downloaded again when the sitemap's ``<lastmod>`` for it is the one
recorded, and is asked for conditionally otherwise (``If-None-Match`` with its
``ETag``, ``If-Modified-Since`` with its ``Last-Modified``): a 304 keeps it. A page
whose body is the one kept is not rewritten, so its stat, and the index, stay as they
are.

What is deleted, and what is kept:

* a page that left the sitemap, or answers 404 or 410, is deleted (its points with it;
  the mass-deletion guard applies); one still listed is noted in ``status``;
* a page ``robots.txt`` disallows is skipped with a note, and deleted when kept;
* a page that cannot be fetched (no connection, a timeout, a 5xx after the retries, a
  401 or 403) keeps its last copy, and ``status`` lists it as failing; so does every
  page of a site whose ``robots.txt`` answers 5xx or nothing (none is asked for);
* a sitemap that cannot be fetched or read fails the whole fetch: nothing is deleted,
  ``status`` says since when fetches fail, and the next try comes after a back-off
  (5 s doubling, at most ``poll_s``);
* a page of a content type that is not a document (an image), on another host (by its
  URL or its redirect), over ``max_page_bytes`` or past ``max_pages`` is skipped with a
  note in ``status``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from ingestd.daemon.sources.base import DRY_RUN_FIRST_FETCH, ChangeMode, Fetched, FileStat, Scan
from ingestd.daemon.sources.beneath import read_beneath, stat_beneath
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.sources.sitemap.client import SiteClient, SiteError, redact
from ingestd.daemon.sources.sitemap.config import SitemapSourceConfig
from ingestd.daemon.sources.sitemap.fetch import SiteFetch
from ingestd.daemon.sources.sitemap.robots import SiteRobots
from ingestd.daemon.sources.sitemap.shown import (
    PAGES,
    STATE_FILE,
    read_state,
    site_dir,
    site_empty_note,
)
from ingestd.daemon.statedir import make_private_dir

__all__ = ["RETRY_FIRST_S", "SitemapSource"]

logger = logging.getLogger(__name__)

#: First delay after a failed fetch, seconds; doubled at every further failure.
RETRY_FIRST_S = 5.0


class SitemapSource(Fetched):
    """The pages of a site's sitemap, kept in the state dir (a polled ``Source``).

    Its power: it is :class:`~ingestd.daemon.sources.base.Fetched` (from its site).

    Args:
        config: the source's configuration (``url``, ``poll_s``, ``max_pages``,
            ``max_page_bytes``, ``timeout_s``, ``retries``, ``concurrency``, ``robots``,
            ``headers``, ``headers_env``, ``include``/``exclude``).
        state_dir: ingestd's state dir (the pages are kept in it).

    Attributes:
        downloaded: page bodies downloaded so far (a 304 or a ``<lastmod>`` as
            recorded downloads none).

    Raises:
        ValueError: no state dir was given.
    """

    kind: ClassVar[str] = "sitemap"
    changes: ChangeMode = "polled"

    def __init__(self, config: SitemapSourceConfig, state_dir: Path | None = None) -> None:
        if state_dir is None:
            raise ValueError("a sitemap source needs a state dir for its pages")
        self.name = config.name
        self.config = config
        self.url = config.url
        self.root = site_dir(Path(state_dir), config.name)
        self.pages_dir = self.root / PAGES
        self.filter = SourceFilter(config.model_copy(update={"gitignore": False}))
        self._fetch = SiteFetch(config, self.pages_dir, self.filter)
        self._lock = threading.Lock()  # one fetch at a time
        self._record: tuple[tuple[int, int], dict[str, Any]] | None = None
        self._failures = int(self.fetch_state().get("failures") or 0)  # in a row
        self.downloaded = 0

    def __repr__(self) -> str:
        return f"SitemapSource(name={self.name!r}, url={redact(self.url)!r})"

    # -- the record -------------------------------------------------------------------------

    def fetch_state(self) -> dict[str, Any]:
        """The record of the fetches: ``fetched_at``, ``failing_since``, ``error``, ``pages``..."""
        try:
            st = (self.root / STATE_FILE).stat()
        except OSError:
            return {}
        key = (st.st_mtime_ns, st.st_size)
        if self._record is None or self._record[0] != key:
            self._record = (key, read_state(self.root) or {})
        return self._record[1]

    def _pages(self) -> dict[str, dict[str, Any]]:
        """The pages of the last good fetch: path -> record (the cached record: read only)."""
        pages: dict[str, dict[str, Any]] = self.fetch_state().get("pages") or {}
        return pages

    def _write_state(self, **update: Any) -> None:
        make_private_dir(self.root)
        state = {**self.fetch_state(), **update, "url": redact(self.url)}
        tmp = self.root / (STATE_FILE + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(state, f)
            f.flush()
            st = os.fstat(f.fileno())
        os.replace(tmp, self.root / STATE_FILE)
        # what was written is the record (two writes within the file system's clock
        # granularity, of one size, would otherwise look unchanged)
        self._record = ((st.st_mtime_ns, st.st_size), state)

    @property
    def poll_s(self) -> float:
        """Seconds until the next fetch: ``poll_s``, or the back-off while fetches fail."""
        if not self._failures:
            return float(self.config.poll_s)
        return float(min(self.config.poll_s, RETRY_FIRST_S * 2 ** (self._failures - 1)))

    # -- fetching ---------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Fetch the sitemap and its pages; whether a page was written, came or went.

        Raises:
            SiteError: the sitemap could not be fetched or read (recorded: ``status``
                shows it and since when); every page kept stays as it is.
        """
        with self._lock:
            before = dict(self._pages())
            if not self.fetch_state().get("fetched_at"):  # status: the URL, a fetch under way
                self._write_state(fetch_started=time.time())
            try:
                with SiteClient(self.config) as client:
                    entries, skipped = self._fetch.walk(client)
                    robots = SiteRobots(client, enabled=self.config.robots)
                    got = self._fetch.pages(client, entries, before, robots)
            except SiteError as exc:
                st = self.fetch_state()
                self._failures += 1
                self._write_state(
                    failing_since=st.get("failing_since") or time.time(),
                    error=str(exc),
                    failures=self._failures,
                )
                # a source never fetched: the sync says it, with this error (once)
                level = logging.WARNING if st.get("fetched_at") else logging.INFO
                logger.log(level, "source %s: the fetch failed: %s", self.name, exc)
                raise
            self._failures = 0
            self._write_state(
                fetched_at=time.time(),
                failing_since=None,
                error=None,
                failures=0,
                pages=got.pages,
                page_errors=got.errors,
                skipped={**skipped, **got.skipped},
                robots_errors=got.robots_errors,
            )
            gone = [p for p in before if p not in got.pages]
            for rel in gone:
                self._fetch.remove(rel)
            self.downloaded += got.downloaded
            logger.info(
                "source %s: %d page(s) in the sitemap, %d downloaded, %d written, %d gone, "
                "%d failing",
                self.name,
                len(got.pages),
                got.downloaded,
                got.written,
                len(gone),
                len(got.errors),
            )
            return bool(got.written or gone or set(got.pages) != set(before))

    def first_fetch_pending(self) -> bool:
        """Whether the site was never fetched and no fetch has failed yet."""
        st = self.fetch_state()
        return not st.get("fetched_at") and not st.get("error")

    def origin(self) -> str:
        """The sitemap's URL, without user info."""
        return redact(self.url)

    def empty_note(self) -> str:
        """What became of the pages the sitemap listed, none of them kept.

        Example: ``sitemap https://example.org/sitemap.xml lists 3 page(s), none kept: 3
        disallowed by robots.txt (`ingestd status` lists them)``.
        """
        return site_empty_note(self.origin(), self.fetch_state())

    def dry_run(self) -> dict[str, Any]:
        """What a dry run says of the site before a fetch: how many pages it would fetch.

        Reads the sitemap (and those it names) and ``robots.txt`` only, fetching no page
        and keeping nothing.

        Returns:
            ``dry_run_note``; when the sitemap answers, ``remote_ok`` and
            ``remote_pages`` (the pages it would fetch: listed, and allowed by
            ``robots.txt``).
        """
        url = redact(self.url)
        try:
            with SiteClient(self.config) as client:
                entries, _ = self._fetch.walk(client)
                robots = SiteRobots(client, enabled=self.config.robots)
                rules = [(e, robots.of(e.loc)) for e in entries]
                agent = client.user_agent
        except SiteError as exc:
            return {"dry_run_note": str(exc)}
        down = sorted({r.url for _, r in rules if r.unavailable is not None})
        allowed = [e for e, r in rules if r.allows(agent, e.loc)]
        held = len(entries) - len(allowed)
        why = f" ({held} disallowed by robots.txt)" if held and not down else ""
        if down:
            why = f" ({', '.join(down)} cannot be read now: no page would be asked for)"
        return {
            "remote_ok": True,
            "remote_pages": len(allowed),
            "dry_run_note": f"sitemap {url} answers; {len(allowed)} page(s) to fetch{why}. "
            + DRY_RUN_FIRST_FETCH,
        }

    # -- the Source interface ---------------------------------------------------------------

    def missing(self) -> str | None:
        """Why nothing can be listed now (never fetched), else ``None``."""
        st = self.fetch_state()
        if st.get("fetched_at"):
            return None
        if st.get("error"):  # it names the sitemap's URL
            return f"not fetched yet ({st['error']})"
        return "not fetched yet"

    def scan(self, under: str = "") -> Scan:
        """Every page kept (or those under folder ``under``), with its file's stat."""
        out = Scan()
        prefix = under.rstrip("/") + "/" if under else ""
        for rel in self._pages():
            if prefix and not (rel.startswith(prefix) or rel == under):
                continue
            st = stat_beneath(self.pages_dir, rel)
            if st is not None:
                out[rel] = FileStat.of(st)
        return out

    def is_folder(self, rel: str) -> bool:
        """Whether ``rel`` is a folder of pages."""
        prefix = rel.rstrip("/") + "/"
        return any(p.startswith(prefix) for p in self._pages())

    def stat(self, rel: str) -> FileStat | None:
        """The stat of page ``rel``'s file, or ``None`` when it is not a page kept."""
        if rel not in self._pages():
            return None
        st = stat_beneath(self.pages_dir, rel)
        return FileStat.of(st) if st is not None else None

    def accepts(self, rel: str) -> bool:
        """Whether a page at ``rel`` would be a document (``include``/``exclude``)."""
        return self.filter.accepts(rel)

    def ignores_folder(self, rel: str) -> bool:
        """Whether folder ``rel`` is left out by ``exclude``."""
        return self.filter.ignores_dir(rel)

    def read(self, rel: str) -> bytes:
        """The bytes of page ``rel`` as last fetched.

        Raises:
            FileNotFoundError: no such page is kept.
            OSError: its file cannot be read.
        """
        if rel not in self._pages():
            raise FileNotFoundError(rel)
        return read_beneath(self.pages_dir, rel)

    def revision(self) -> str | None:
        """``None``: a site has no commit."""
        return None
