"""A sitemap's entries, read from its XML (sitemaps.org protocol 0.9), safely.

A sitemap is a ``<urlset>`` of ``<url>`` entries, or a ``<sitemapindex>`` of
``<sitemap>`` entries naming further sitemaps; each entry has a ``<loc>`` and an
optional ``<lastmod>``. A gzip-compressed sitemap (``sitemap.xml.gz``, or a body that
starts with gzip's magic bytes) is decompressed first.

The XML comes from the network, so it is read with limits: at most
:data:`MAX_SITEMAP_BYTES` (the protocol's own limit, 50 MiB uncompressed; a gzip bomb
stops there), no document type declaration (a sitemap has none; refusing it refuses
every entity expansion and external entity, what ``defusedxml`` refuses too, which is
not a dependency of ingestd), parsed by the standard library's expat (2.4.1 and later
bound entity amplification besides). Elements are matched by local name, so a sitemap
without the namespace is read too.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Literal
from xml.parsers import expat

__all__ = ["MAX_SITEMAP_BYTES", "Sitemap", "SitemapEntry", "SitemapFormatError", "parse_sitemap"]

#: Most bytes of one sitemap, uncompressed (sitemaps.org: 50 MiB, 50,000 URLs).
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


class SitemapFormatError(ValueError):
    """A body that is not a sitemap: not XML, too large, or with a document type.

    Attributes:
        html: the body is an HTML page (a site's home page given as the sitemap).
    """

    def __init__(self, why: str, html: bool = False) -> None:
        super().__init__(why)
        self.html = html


#: How an HTML page starts (after blanks, a BOM, comments): its doctype or root element.
_HTML_START = re.compile(
    rb"^(?:\s|\xef\xbb\xbf|<!--.*?-->)*<(?:!doctype\s+html|html[\s>])", re.I | re.S
)


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One ``<url>`` or ``<sitemap>`` entry: its ``loc``, and ``lastmod`` as written or ``None``."""

    loc: str
    lastmod: str | None = None


@dataclass(slots=True)
class Sitemap:
    """A parsed sitemap.

    Attributes:
        kind: ``urlset`` (its entries are pages) or ``sitemapindex`` (sitemaps).
        entries: in document order.
    """

    kind: Literal["urlset", "sitemapindex"]
    entries: list[SitemapEntry] = field(default_factory=list)


def _gunzip(data: bytes) -> bytes:
    """``data`` decompressed, at most :data:`MAX_SITEMAP_BYTES` of it."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, MAX_SITEMAP_BYTES + 1)
    except zlib.error as exc:
        raise SitemapFormatError(f"not a valid gzip file ({exc})") from None
    if len(out) > MAX_SITEMAP_BYTES:
        raise SitemapFormatError(f"over {MAX_SITEMAP_BYTES} bytes uncompressed")
    return out


def _not_html(data: bytes, root: str = "") -> None:
    """Raise when ``data`` is an HTML page (by its start, or its XHTML ``root`` element)."""
    if root == "html" or _HTML_START.match(data[:4096]):
        raise SitemapFormatError("this is an HTML page, not a sitemap", html=True)


def parse_sitemap(data: bytes) -> Sitemap:
    """The entries of sitemap ``data`` (XML, or gzip-compressed XML).

    Raises:
        SitemapFormatError: not a sitemap: over :data:`MAX_SITEMAP_BYTES`, an HTML
            page (``html`` set), not well-formed XML, a document type declaration, or
            a root element other than ``urlset`` or ``sitemapindex``.
    """
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip(data)
    if len(data) > MAX_SITEMAP_BYTES:
        raise SitemapFormatError(f"over {MAX_SITEMAP_BYTES} bytes")
    _not_html(data)
    parser = expat.ParserCreate(namespace_separator=" ")
    stack: list[str] = []
    root: list[str] = []
    entries: list[SitemapEntry] = []
    current: dict[str, list[str]] = {}

    def no_doctype(*_: object) -> None:
        raise SitemapFormatError("a document type declaration (a sitemap has none)")

    def start(name: str, attrs: object) -> None:
        local = name.rpartition(" ")[2]
        if not stack:
            root.append(local)
        stack.append(local)
        if len(stack) == 2:
            current.clear()

    def end(name: str) -> None:
        stack.pop()
        if len(stack) == 1:  # an entry ends
            loc = "".join(current.get("loc", [])).strip()
            if loc:
                lastmod = "".join(current.get("lastmod", [])).strip() or None
                entries.append(SitemapEntry(loc, lastmod))

    def text(data: str) -> None:
        if len(stack) == 3 and stack[2] in ("loc", "lastmod"):
            current.setdefault(stack[2], []).append(data)

    parser.StartDoctypeDeclHandler = no_doctype
    parser.EntityDeclHandler = no_doctype
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise SitemapFormatError(f"not well-formed XML ({exc})") from None
    _not_html(data, root[0] if root else "")
    if not root or root[0] not in ("urlset", "sitemapindex"):
        got = root[0] if root else "nothing"
        raise SitemapFormatError(f"the root element is {got}, not urlset or sitemapindex")
    kind: Literal["urlset", "sitemapindex"] = "urlset" if root[0] == "urlset" else "sitemapindex"
    return Sitemap(kind, entries)
