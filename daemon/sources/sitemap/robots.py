"""A site's ``robots.txt``: read once per fetch and host, asked before each page.

A well-behaved crawler reads ``/robots.txt`` (RFC 9309, the Robots Exclusion Protocol)
before it asks for a page, skips the pages it disallows, and waits ``Crawl-delay``
seconds between two requests when it says so. The rules are read by the standard
library's :class:`urllib.robotparser.RobotFileParser`; the file is fetched with the
source's own :class:`~ingestd.daemon.sources.sitemap.client.SiteClient`, so its
headers, timeout and retries apply, and the groups matched are those of the
``User-Agent`` it sends (ingestd's own unless configured; ``*`` otherwise).

What an answer means is what Google documents for its crawlers ("How Google interprets
the robots.txt specification", developers.google.com/search/docs/crawling-indexing/
robots/robots_txt, "Handling of errors and HTTP status codes"), which RFC 9309
section 2.3.1 also says (a 401 or 403 allows every page there, where
:meth:`~urllib.robotparser.RobotFileParser.read` would allow none, so the file is read
here and handed to :meth:`~urllib.robotparser.RobotFileParser.parse`):

* 2xx: the rules it holds (a body over :data:`MAX_ROBOTS_BYTES` is read up to there);
* 4xx but 429 (a 401 or 403 too): no ``robots.txt``, every page is allowed;
* 429, 5xx or no answer (after the retries): every page is disallowed for this fetch,
  and the pages kept keep their last copy (:attr:`Robots.unavailable` says why). Google
  goes on with its cached copy of the file after 12 hours of this; ingestd keeps none
  and tries again at the next fetch.

The ``robots.txt`` of a host is read once per fetch (its ``http://`` and ``https://``
origins are two files: the protocol's rule, RFC 9309 section 2.3).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

from ingestd.daemon.sources.sitemap.client import SiteError, answered, redact

if TYPE_CHECKING:
    from ingestd.daemon.sources.sitemap.client import SiteClient

__all__ = ["MAX_CRAWL_DELAY_S", "MAX_ROBOTS_BYTES", "Pacer", "Robots", "SiteRobots"]

#: Most bytes of a ``robots.txt`` read (Google's limit, 500 KiB; RFC 9309 asks at
#: least 500 KiB): the rest is ignored.
MAX_ROBOTS_BYTES = 500 * 1024
#: Longest ``Crawl-delay`` kept, seconds: a longer one is cut to it (a delay of
#: minutes would make one fetch of a large site last days).
MAX_CRAWL_DELAY_S = 10.0


@dataclass
class Robots:
    """The ``robots.txt`` of one origin, as read in this fetch.

    Attributes:
        url: the file's URL (without user info).
        parser: its rules; ``None`` when every page is allowed (no file) or none is
            (``unavailable``).
        unavailable: why every page is disallowed for this fetch (a 5xx, no answer),
            else ``None``.
    """

    url: str
    parser: RobotFileParser | None = None
    unavailable: str | None = None

    def allows(self, user_agent: str, url: str) -> bool:
        """Whether ``user_agent`` may fetch ``url``."""
        if self.unavailable is not None:
            return False
        return self.parser is None or self.parser.can_fetch(user_agent, url)

    def crawl_delay(self, user_agent: str) -> float | None:
        """The ``Crawl-delay`` for ``user_agent``, seconds (at most :data:`MAX_CRAWL_DELAY_S`)."""
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(user_agent)
        return None if delay is None else min(float(delay), MAX_CRAWL_DELAY_S)


@dataclass
class SiteRobots:
    """The ``robots.txt`` files of one fetch, each origin's read once (asked from one thread).

    Args:
        client: the fetch's client.
        enabled: ``False``: every page is allowed and no file is read (``robots: false``).
    """

    client: SiteClient
    enabled: bool = True
    read: dict[tuple[str, str], Robots] = field(default_factory=dict)

    def of(self, url: str) -> Robots:
        """The ``robots.txt`` of ``url``'s origin (read at the first call for it)."""
        parts = urlsplit(url)
        origin = (parts.scheme.lower(), parts.netloc.lower())
        if origin not in self.read:
            robots_url = urlunsplit((*origin, "/robots.txt", "", ""))
            self.read[origin] = (
                self._fetch(robots_url) if self.enabled else Robots(redact(robots_url))
            )
        return self.read[origin]

    def _fetch(self, url: str) -> Robots:
        shown = redact(url)
        try:
            page = self.client.get(url, max_bytes=MAX_ROBOTS_BYTES, keep_start=True)
        except SiteError as exc:
            return Robots(shown, unavailable=str(exc))
        if 400 <= page.status < 500:
            return Robots(shown)  # no robots.txt: every page is allowed
        if page.status != 200:
            return Robots(shown, unavailable=f"GET {shown}: {answered(page.status)}")
        parser = RobotFileParser(url)
        parser.parse(page.body.decode("utf-8", errors="replace").splitlines())
        return Robots(shown, parser)


class Pacer:
    """Spaces requests ``delay`` seconds apart, from their starts (``Crawl-delay``).

    Args:
        delay: seconds between the starts of two requests; ``None`` or 0: no wait.

    Attributes:
        clock: the monotonic clock read (seconds).
        sleep: how a wait is made (seconds).
    """

    clock: Callable[[], float] = staticmethod(time.monotonic)
    sleep: Callable[[float], object] = staticmethod(time.sleep)

    def __init__(self, delay: float | None) -> None:
        self.delay = delay or 0.0
        self._next: float | None = None
        self._lock = threading.Lock()

    def wait(self) -> None:
        """Return when the next request may start (at once for the first)."""
        if not self.delay:
            return
        with self._lock:
            if self._next is not None:
                pause = self._next - type(self).clock()
                if pause > 0:
                    type(self).sleep(pause)
            self._next = type(self).clock() + self.delay
