"""A documentation site on loopback for the sitemap tests: ``http.server`` in a thread.

:class:`Site` serves the pages of a dict (URL path -> :class:`Served`), answers
conditional requests (``If-None-Match`` with the body's ETag, ``If-Modified-Since``)
with 304, counts the bodies it sent per path, counts the page requests in flight at
once (and can hold each until a number of them overlap), speaks HTTPS too on the same
port when given a certificate authority (trustme's), and can be made to fail (every
answer a status, or stopped: connection refused).
"""

from __future__ import annotations

import gzip
import hashlib
import socket
import ssl
import threading
from collections import Counter
from dataclasses import dataclass
from email.utils import formatdate
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import trustme

from tests.helpers import MD_DOCS, SMALL_MD


@dataclass
class Served:
    """One resource: its body, content type, the status it answers with, and the path
    whose body must be sent before it answers (``after``: an order of answers forced).
    """

    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    after: str | None = None


def urlset(base: str, paths: list[str], lastmod: dict[str, str] | None = None) -> bytes:
    """A ``<urlset>`` listing ``paths`` of ``base`` (with ``<lastmod>`` where given)."""
    rows = []
    for p in paths:
        mod = f"<lastmod>{lastmod[p]}</lastmod>" if lastmod and p in lastmod else ""
        rows.append(f"<url><loc>{base}{p}</loc>{mod}</url>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(rows)
        + "</urlset>\n"
    ).encode()


def sitemapindex(base: str, paths: list[str]) -> bytes:
    """A ``<sitemapindex>`` naming the sitemaps at ``paths`` of ``base``."""
    rows = "".join(f"<sitemap><loc>{base}{p}</loc></sitemap>" for p in paths)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</sitemapindex>'
    ).encode()


def gzipped(data: bytes) -> bytes:
    """``data`` gzip-compressed (a ``sitemap.xml.gz``)."""
    return gzip.compress(data)


class _Server(ThreadingHTTPServer):
    """An HTTP server that speaks HTTPS too on its port when given a context (``tls``)."""

    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        # a TLS ClientHello starts with 0x16: HTTPS and HTTP on one port
        if self.tls is not None and sock.recv(1, socket.MSG_PEEK) == b"\x16":
            sock = self.tls.wrap_socket(sock, server_side=True)
        return sock, addr


class Site:
    """The site: start it, fill :attr:`pages`, read :attr:`sent`; a context manager.

    Attributes:
        pages: URL path -> what it serves (a path not here answers 404).
        sent: URL path -> bodies sent (a 304 sends none).
        requests: URL path -> requests received.
        failing: when set, every request answers this status (500: a broken server).
        headers_seen: the last request's headers.
        in_flight: page requests (under ``/docs/``) being answered now.
        most_in_flight: the most page requests that were answered at once.
        hold_until: when set, a page request waits (at most 10 s) until this many are
            in flight at once, and none waits after that happened: so their overlap is
            counted, not timed.
        tls_requests: requests that came over HTTPS.
        timed_out: holds (``hold_until``, :attr:`Served.after`) that ended at their
            deadline rather than by what they waited for.
    """

    def __init__(self, ca: trustme.CA | None = None) -> None:
        self.pages: dict[str, Served] = {}
        self.sent: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.failing: int | None = None
        self.headers_seen: dict[str, str] = {}
        self.modified = formatdate(1_700_000_000, usegmt=True)
        self.in_flight = 0
        self.most_in_flight = 0
        self.hold_until: int | None = None
        self.tls_requests = 0
        self.timed_out = 0
        self._overlap = threading.Condition()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not self.path.startswith("/docs/"):
                    self._serve()
                    return
                site._enter()
                try:
                    self._serve()
                finally:
                    site._leave()

            def _serve(self) -> None:
                path = self.path.split("?", 1)[0]
                site.requests[path] += 1
                site.headers_seen = dict(self.headers.items())
                if isinstance(self.connection, ssl.SSLSocket):
                    site.tls_requests += 1
                if site.failing is not None:
                    self._answer(site.failing, b"broken", "text/plain")
                    return
                page = site.pages.get(path)
                if page is None:
                    self._answer(404, b"not found", "text/plain")
                    return
                etag = '"' + hashlib.sha256(page.body).hexdigest()[:16] + '"'
                if page.status == 200 and self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.end_headers()
                    return
                if page.after is not None:
                    site._hold(lambda: site.sent[page.after or ""] > 0)
                self._answer(page.status, page.body, page.content_type, etag)
                with site._overlap:  # counted once its body is out
                    site.sent[path] += 1
                    site._overlap.notify_all()

            def _answer(self, status: int, body: bytes, ctype: str, etag: str = "") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                if etag:
                    self.send_header("ETag", etag)
                    self.send_header("Last-Modified", site.modified)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        if ca is not None:
            self._server.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ca.issue_cert("127.0.0.1", "localhost").configure_cert(self._server.tls)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    def _hold(self, until: Any) -> None:
        """Wait (at most 10 s) until ``until()``; a wait cut at its deadline is counted."""
        with self._overlap:
            if not self._overlap.wait_for(until, 10):
                self.timed_out += 1

    def _enter(self) -> None:
        """A page request starts: counted, and held until ``hold_until`` overlap."""
        with self._overlap:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self._overlap.notify_all()
        if self.hold_until is not None:
            self._hold(lambda: self.most_in_flight >= (self.hold_until or 0))

    def release(self) -> None:
        """End every hold now: the requests held answer, and none is held after."""
        with self._overlap:
            self.hold_until = 0
            self._overlap.notify_all()

    def _leave(self) -> None:
        with self._overlap:
            self.in_flight -= 1

    def start(self) -> Site:
        """Serve in a thread of its own."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (a connection is refused after)."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Site:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def publish(self, docs: dict[str, Served], lastmod: dict[str, str] | None = None) -> None:
        """Serve ``docs`` and a ``/sitemap.xml`` that lists them (in their order)."""
        self.pages = {p: s for p, s in self.pages.items() if not p.startswith("/docs/")}
        self.pages.update(docs)
        self.pages["/sitemap.xml"] = Served(
            urlset(self.base, list(docs), lastmod), "application/xml"
        )


def as_html(markdown: str, title: str) -> bytes:
    """A page of ``markdown``'s text as a site would serve it: headings and paragraphs."""
    body, para = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("#") or not line.strip():
            if para:
                body.append(f"<p>{escape(' '.join(para))}</p>")
                para = []
            if line.startswith("#"):
                level = min(len(line) - len(line.lstrip("#")), 6)
                body.append(f"<h{level}>{escape(line.lstrip('#').strip())}</h{level}>")
        elif not line.startswith(("---", "title:", "description:", "weight:")):
            para.append(line.strip())
    return (
        f"<!doctype html><html><head><title>{escape(title)}</title></head>"
        f"<body><nav><a href='/'>Home</a></nav><main>{''.join(body)}</main></body></html>\n"
    ).encode()


def small_pages() -> dict[str, Served]:
    """Four real pages: HTML at a file's and a folder's URL, and Markdown served as such."""
    texts = [(MD_DOCS / rel).read_text() for rel in SMALL_MD[:4]]
    return {
        "/docs/install.html": Served(as_html(texts[0], "Install")),
        "/docs/usage.html": Served(as_html(texts[1], "Usage")),
        "/docs/guide/": Served(as_html(texts[2], "Guide")),
        "/docs/notes": Served(texts[3].encode(), "text/markdown; charset=utf-8"),
    }
