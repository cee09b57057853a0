"""The configuration of a sitemap source (``kind: sitemap``): its site, limits and headers.

The reader is :class:`~ingestd.daemon.sources.sitemap.reader.SitemapSource`; what
``status`` shows of it is :data:`~ingestd.daemon.sources.sitemap.shown.SITEMAP_STATUS`
(docs/guides/sitemap-sources.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from ingestd.daemon.config.models import SourceConfig

__all__ = ["SitemapSourceConfig"]

#: An HTTP header name (RFC 9110 ``token``, letters, digits and ``-`` in practice).
_HEADER = r"^[A-Za-z0-9-]+$"
#: An environment variable's name.
_ENV = r"^[A-Za-z_][A-Za-z0-9_]*$"


class SitemapSourceConfig(SourceConfig):
    """A ``kind: sitemap`` source: the pages a site's sitemap lists, fetched on a schedule.

    Attributes:
        url: the sitemap (``https://docs.example.com/sitemap.xml``), or a sitemap index;
            ``http://`` or ``https://``. Pages on another host are skipped with a note
            (:func:`~ingestd.daemon.sources.sitemap.paths.another_host`: either scheme
            of the sitemap's host is the site).
        poll_s: seconds between two fetches (``ingestd sync NAME`` and ``ingestd
            resync`` fetch at once).
        max_pages: most pages indexed, in the sitemap's order; the others are skipped
            with a note.
        max_page_bytes: a page whose body is longer (bytes) is skipped with a note.
        timeout_s: seconds one request may take (connecting, and each read).
        retries: tries after the first of a request that failed transiently (no
            connection, a timeout, 429 or 5xx), with back-off.
        concurrency: most page requests in flight at once (1 while the site's
            ``robots.txt`` sets a ``Crawl-delay``).
        robots: honour the site's ``robots.txt`` (:mod:`~ingestd.daemon.sources.sitemap.robots`):
            disallowed pages are skipped with a note, ``Crawl-delay`` is kept;
            ``false`` for a site of your own that asks crawlers to stay away.
        headers: HTTP headers sent with every request, shown as they are: no secret
            here. ``User-Agent`` defaults to ingestd's own
            (:data:`~ingestd.daemon.sources.sitemap.client.USER_AGENT`); the one sent is
            the one ``robots.txt`` is matched with.
        headers_env: HTTP headers whose value is read from an environment variable,
            header name -> the variable's name (``{Authorization: DOCS_TOKEN}``); the
            value is read when a fetch starts and never logged, shown or stored.

    ``name`` is required; ``include`` and ``exclude`` filter pages by their path
    (:mod:`~ingestd.daemon.sources.sitemap.paths`: ``/docs/`` is ``docs/index.html``).
    It has no root on this machine: its pages are kept in the state dir.
    """

    has_root: ClassVar[bool] = False
    not_read: ClassVar[frozenset[str]] = frozenset({"gitignore"})

    kind: Literal["sitemap"] = "sitemap"
    url: str = ""
    poll_s: float = Field(3600.0, gt=0)
    max_pages: int = Field(10_000, ge=1)
    max_page_bytes: int = Field(20 * 1024**2, ge=1)
    timeout_s: float = Field(30.0, gt=0, le=3600)
    retries: int = Field(3, ge=0, le=20)
    concurrency: int = Field(4, ge=1, le=32)
    robots: bool = True
    headers: Mapping[str, str] = Field(default_factory=dict)
    headers_env: Mapping[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("expected an http:// or https:// URL of a sitemap")
        return v

    @field_validator("headers", "headers_env")
    @classmethod
    def _header_names(cls, v: Mapping[str, str]) -> Mapping[str, str]:
        bad = [k for k in v if not re.match(_HEADER, k)]
        if bad:
            raise ValueError(f"not a header name: {', '.join(map(repr, bad))}")
        return dict(v)

    @field_validator("headers_env")
    @classmethod
    def _env_names(cls, v: Mapping[str, str]) -> Mapping[str, str]:
        bad = [e for e in v.values() if not re.match(_ENV, e)]
        if bad:
            raise ValueError(f"not an environment variable's name: {', '.join(map(repr, bad))}")
        return v

    @model_validator(mode="after")
    def _site(self) -> SitemapSourceConfig:
        missing = [k for k in ("url", "name") if k not in self.model_fields_set]
        if missing:
            raise ValueError(f"a sitemap source needs {' and '.join(missing)}")
        both = {k.lower() for k in self.headers} & {k.lower() for k in self.headers_env}
        if both:
            raise ValueError(f"headers and headers_env both set {', '.join(sorted(both))}")
        return self

    def resolved(self, base: Path) -> Self:
        """This source as it is: a URL is relative to no folder."""
        return self
