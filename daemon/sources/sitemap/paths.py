"""A page's path in its source: its URL's path, made a file name a rule can read.

A page is kept at the path its URL names on its site, so its source-relative path is
stable and the chunking rules (matched by file name) apply as to a folder of the same
pages: ``https://site/docs/install.html`` is ``docs/install.html``. A URL whose path
ends with ``/`` names its folder's ``index.html``; one whose last segment has no
document suffix gets the suffix of its content type (``/docs/install`` served as
``text/html`` is ``docs/install.html``, as ``text/markdown`` ``docs/install.md``), so
``/docs/v1.2`` and ``/docs/v1.2/intro.html`` do not collide. The query and fragment are
not part of the path.
"""

from __future__ import annotations

import posixpath
from urllib.parse import unquote, urlsplit

__all__ = [
    "DOCUMENT_SUFFIXES",
    "TYPE_SUFFIXES",
    "named_suffix",
    "another_host",
    "page_path",
    "suffix_for",
]

#: A content type (without parameters) -> the suffix of a page of that type whose URL
#: names none. A type not here is not a document: the page is skipped with a note.
TYPE_SUFFIXES: dict[str, str] = {
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "text/plain": ".txt",
    "text/x-rst": ".rst",
    "text/prs.fallenstein.rst": ".rst",
    "text/asciidoc": ".adoc",
    "application/pdf": ".pdf",
    "application/x-ipynb+json": ".ipynb",
}
#: Suffixes a URL's last segment keeps as they are (the formats the rules read).
DOCUMENT_SUFFIXES = frozenset(
    (".html", ".htm", ".md", ".markdown", ".mdx", ".rst", ".txt", ".pdf", ".ipynb")
    + (".adoc", ".asciidoc")
)


#: The port a URL of a scheme names when it names none.
DEFAULT_PORTS = {"http": 80, "https": 443}


def _host_port(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: a host of its own
        return parts.netloc.lower(), None
    return (parts.hostname or "").lower(), port


def another_host(url: str, sitemap: str) -> str | None:
    """Why ``url`` is not on the host of ``sitemap``, else ``None``.

    The sitemaps protocol (sitemaps.org, "Sitemap file location") lets a sitemap list
    the URLs of its own host only, in its own scheme. ingestd keeps the host rule and
    lets the scheme go: ``http://`` and ``https://`` of one host are one site, since a
    site moved to HTTPS often still has an ``http://`` sitemap listing its ``https://``
    pages (or the reverse, its pages redirecting). The port counts, unless each URL
    names its scheme's default (``http://h`` and ``https://h``). ``www.example.com``
    and ``example.com`` are two hosts (they may serve two sites), and the note says so.

    Returns:
        ``None`` when on the same host; else ``listed on www.example.com, the sitemap
        is on example.com`` (the hosts, with their ports when named).
    """
    (host, port), (site, site_port) = _host_port(url), _host_port(sitemap)
    if host == site and (
        port == site_port
        or (
            port in (None, DEFAULT_PORTS.get(urlsplit(url).scheme.lower()))
            and site_port in (None, DEFAULT_PORTS.get(urlsplit(sitemap).scheme.lower()))
        )
    ):
        return None
    here, there = urlsplit(url).netloc.lower(), urlsplit(sitemap).netloc.lower()
    here, there = here.rpartition("@")[2], there.rpartition("@")[2]
    return f"listed on {here}, the sitemap is on {there}"


def suffix_for(content_type: str | None) -> str | None:
    """The suffix of a page of ``content_type`` (``text/html; charset=utf-8``), else ``None``."""
    if not content_type:
        return None
    return TYPE_SUFFIXES.get(content_type.split(";", 1)[0].strip().lower())


def page_path(url: str, suffix: str = ".html") -> str:
    """The source-relative path of the page at ``url`` (see the module docstring).

    Args:
        url: the page's URL.
        suffix: what a last segment without a document suffix gets: the content type's
            (:func:`suffix_for`); before the page is fetched, ``.html`` (the common case).

    Raises:
        ValueError: the URL's path holds ``.`` or ``..`` segments, an empty segment, a
            NUL or a backslash: not a path a page can be kept at.
    """
    raw = unquote(urlsplit(url).path, errors="strict")
    if raw.endswith("/") or not raw:
        raw += "index" + suffix
    segments = raw.lstrip("/").split("/")
    if any(s in ("", ".", "..") for s in segments) or "\0" in raw or "\\" in raw:
        raise ValueError(f"cannot keep a page at URL path {raw!r}")
    path = "/".join(segments)
    if posixpath.splitext(segments[-1])[1].lower() not in DOCUMENT_SUFFIXES:
        path += suffix
    return path


def named_suffix(url: str) -> bool:
    """Whether ``url``'s last segment names a document suffix (its path needs no content type)."""
    last = urlsplit(url).path.rpartition("/")[2]
    return posixpath.splitext(unquote(last))[1].lower() in DOCUMENT_SUFFIXES
