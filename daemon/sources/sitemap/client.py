"""HTTP for a sitemap source: one client per fetch, retries, conditional requests, limits.

Requests go through httpx (a dependency already: the embedding endpoint's client),
redirects followed, each request bounded by ``timeout_s``. A request that fails
transiently (no connection, a timeout, 429 or a 5xx answer) is tried again
``retries`` times by tenacity, waiting 0.5, 1, 2, ... seconds (at most
:data:`MAX_RETRY_WAIT_S`); after the last try it raises :class:`SiteError`, an
:class:`~ingestd.chunkers.errors.UnavailableError`: the source keeps what it has. A
page fetched before is asked for with its ``ETag`` (``If-None-Match``) and
``Last-Modified`` (``If-Modified-Since``): an unchanged page answers 304 with no body.

Every request carries a ``User-Agent``: the configured one, else ingestd's own
(:data:`USER_AGENT`), which names the product so a site's ``robots.txt`` and logs can
tell it apart. One client serves the fetch's concurrent requests (httpx's connection
pool is thread-safe), with at most ``concurrency`` connections.

Header values read from the environment (``headers_env``) are secrets: they are sent,
and never logged, shown or stored; no message of this module holds one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ingestd.chunkers.errors import UnavailableError

if TYPE_CHECKING:
    import httpx

    from ingestd.daemon.sources.sitemap.config import SitemapSourceConfig

__all__ = [
    "MAX_RETRY_WAIT_S",
    "USER_AGENT",
    "Page",
    "SiteClient",
    "SiteError",
    "answered",
    "redact",
]

logger = logging.getLogger(__name__)

#: Longest wait between two tries of a request, seconds.
MAX_RETRY_WAIT_S = 30.0
#: First wait after a failed try, seconds (doubled at every further failure).
FIRST_RETRY_WAIT_S = 0.5


def _user_agent() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"ingestd/{version('ingestd')} (sitemap source)"
    except PackageNotFoundError:  # pragma: no cover - run from a tree not installed
        return "ingestd (sitemap source)"


#: The ``User-Agent`` sent when the source's ``headers`` name none; ``robots.txt``
#: groups for ``ingestd`` (or ``*``) apply to it.
USER_AGENT = _user_agent()


class SiteError(UnavailableError, OSError):
    """A site did not answer as it should: no connection, a timeout, a 5xx answer, ...

    Its message names the URL (without user info) and never holds a secret header.

    Attributes:
        why: the message without the URL (``the site answered 503 Service
            Unavailable``), for a line that names the URL already.
    """

    why: str = ""

    @classmethod
    def of(cls, url: str, why: str, transient: bool = True) -> SiteError:
        """``GET url: why`` (``url`` without user info)."""
        error = cls(f"GET {redact(url)}: {why}")
        error.why = why
        error.transient = transient
        return error


class _Transient(Exception):
    """A try that may succeed when repeated (retried by tenacity)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass(frozen=True, slots=True)
class Page:
    """One answer of the site.

    Attributes:
        status: the HTTP status (200, 304, 404, ...); never a 5xx (those raise).
        url: the URL answered after redirects.
        body: the body (decoded from its ``Content-Encoding``); empty for 304, and
            when the body was over the limit (``too_large``).
        etag: the ``ETag`` header, if any.
        last_modified: the ``Last-Modified`` header, if any.
        content_type: the ``Content-Type`` header, if any.
        too_large: the body was longer than the limit asked (bytes); it was not read
            (only its start, when asked: ``keep_start``).
    """

    status: int
    url: str
    body: bytes = b""
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None
    too_large: bool = False


def answered(status: int) -> str:
    """``the site answered 404 Not Found``: what an HTTP status says, for a message."""
    from http import HTTPStatus

    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        return f"the site answered {status}"
    return f"the site answered {status} {phrase}"


def redact(url: str) -> str:
    """``url`` without the user name and password of its user info."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


class SiteClient:
    """HTTP requests to one site, for one fetch (close it, or use it as a context manager).

    Args:
        config: the source's configuration (``timeout_s``, ``retries``, ``headers``,
            ``headers_env``, ``concurrency``).
        environ: where ``headers_env``'s variables are read (default ``os.environ``).

    Attributes:
        user_agent: the ``User-Agent`` sent (``robots.txt`` is matched with it).

    Raises:
        SiteError: a variable ``headers_env`` names is not set (not transient).
    """

    def __init__(
        self, config: SitemapSourceConfig, environ: Mapping[str, str] | None = None
    ) -> None:
        import httpx

        env = os.environ if environ is None else environ
        headers = dict(config.headers)
        if not any(k.lower() == "user-agent" for k in headers):
            headers["User-Agent"] = USER_AGENT
        self.user_agent = next(v for k, v in headers.items() if k.lower() == "user-agent")
        for header, var in config.headers_env.items():
            value = env.get(var)
            if not value:
                error = SiteError(
                    f"the environment variable {var} (headers_env.{header}) is not set"
                )
                error.transient = False
                raise error
            headers[header] = value
        self.retries = config.retries
        self._client = httpx.Client(
            timeout=config.timeout_s,
            follow_redirects=True,
            headers=headers,
            limits=httpx.Limits(max_connections=config.concurrency),
        )

    def __enter__(self) -> SiteClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._client.close()

    def get(
        self,
        url: str,
        etag: str | None = None,
        last_modified: str | None = None,
        max_bytes: int | None = None,
        keep_start: bool = False,
    ) -> Page:
        """``GET url``, conditional when ``etag`` or ``last_modified`` is given.

        Args:
            url: the URL.
            etag: the page's last ``ETag`` (sent as ``If-None-Match``).
            last_modified: its last ``Last-Modified`` (sent as ``If-Modified-Since``).
            max_bytes: a longer body is not read (:attr:`Page.too_large`).
            keep_start: a longer body's first ``max_bytes`` are kept (not an empty
                body).

        Raises:
            SiteError: no answer, or a 429 or 5xx answer, after every retry.
        """
        import tenacity

        headers = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Transient),
            stop=tenacity.stop_after_attempt(self.retries + 1),
            wait=_wait,
            before_sleep=lambda state: logger.info(
                "%s: %s; trying again", redact(url), _why(state)
            ),
            reraise=True,
        )
        try:
            return retrying(self._get, url, headers, max_bytes, keep_start)
        except _Transient as exc:
            raise SiteError.of(url, exc.why) from None

    def _get(
        self, url: str, headers: dict[str, str], max_bytes: int | None, keep_start: bool
    ) -> Page:
        import httpx

        try:
            with self._client.stream("GET", url, headers=headers) as r:
                if r.status_code == 429 or r.status_code >= 500:
                    raise _Transient(answered(r.status_code))
                body = bytearray()
                too_large = False
                if r.status_code == 200:
                    for part in r.iter_bytes():
                        body += part
                        if max_bytes is not None and len(body) > max_bytes:
                            too_large = True
                            del body[max_bytes if keep_start else 0 :]
                            break
                return _page(r, bytes(body), too_large)
        except httpx.TransportError as exc:
            raise _Transient(_transport_why(exc)) from None
        except httpx.HTTPError as exc:  # a redirect loop, an invalid URL
            raise SiteError.of(url, f"{type(exc).__name__}: {exc}", transient=False) from None


def _page(r: httpx.Response, body: bytes, too_large: bool) -> Page:
    h = r.headers
    return Page(
        status=r.status_code,
        url=str(r.url),
        body=body,
        etag=h.get("etag"),
        last_modified=h.get("last-modified"),
        content_type=h.get("content-type"),
        too_large=too_large,
    )


def _transport_why(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return f"no answer ({type(exc).__name__}: {text})"


def _why(state: Any) -> str:
    exc = state.outcome.exception() if state.outcome else None
    return exc.why if isinstance(exc, _Transient) else str(exc)


def _wait(state: Any) -> float:
    """Seconds before the next try: 0.5, 1, 2, ... at most :data:`MAX_RETRY_WAIT_S`."""
    return float(min(MAX_RETRY_WAIT_S, FIRST_RETRY_WAIT_S * 2 ** (state.attempt_number - 1)))
