"""Where a sitemap source keeps its pages, and what ``status`` shows of it (no imports).

A sitemap source's root is a folder of the state dir, ``sitemap/<readable>-<digest>``
(:func:`site_dir`, named like a git mirror:
:func:`~ingestd.daemon.sources.mirror.folder_name`): the pages under ``pages/`` at
their paths, and ``ingestd-sitemap.json`` (:data:`STATE_FILE`), written by
:class:`~ingestd.daemon.sources.sitemap.reader.SitemapSource` after every fetch: the
sitemap's URL, each page's URL and validators (``ETag``, ``Last-Modified``,
``<lastmod>``), the fetches, the pages that failed or were skipped. It holds no
secret. ``status`` and ``sources`` read it here without the config's or HTTP's
machinery; :data:`SITEMAP_STATUS` is the kind's
:class:`~ingestd.daemon.sources.shown.KindStatus`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.daemon.sources.mirror import folder_name
from ingestd.daemon.sources.shown import fetch_lines

if TYPE_CHECKING:
    from ingestd.daemon.sources.shown import When

__all__ = [
    "PAGES",
    "SITEMAP_STATUS",
    "STATE_FILE",
    "SitemapStatus",
    "read_state",
    "site_dir",
    "site_empty_note",
    "site_status",
]

#: The file in a sitemap source's folder that records its fetches and pages.
STATE_FILE = "ingestd-sitemap.json"
#: The folder under it that holds the pages.
PAGES = "pages"
#: Most page errors and skipped pages listed by ``status --json`` (all are counted).
LISTED = 50


def site_dir(state_dir: Path, name: str) -> Path:
    """The folder of sitemap source ``name`` in ``state_dir``: ``sitemap/<folder_name>``."""
    return state_dir / "sitemap" / folder_name(name)


def read_state(root: Path) -> dict[str, Any] | None:
    """The record of the sitemap source whose folder is ``root``, else ``None``."""
    try:
        st = json.loads((root / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return st if isinstance(st, dict) else None


def site_status(root: Path) -> dict[str, Any] | None:
    """What ``status`` shows of the sitemap source whose folder is ``root``, else ``None``.

    Returns:
        ``sitemap`` (its URL, without user info), ``pages`` (pages kept),
        ``fetched_at`` (the last good fetch, seconds since the epoch), ``fetch_started``
        (when the fetches of a site never fetched began, else ``None``), ``failing_since``
        (fetches fail since then, else ``None``), ``fetch_error``, ``page_errors``
        (pages whose last fetch failed, their last copy kept: ``url`` and ``error``, at
        most :data:`LISTED`), ``page_errors_count``, ``pages_skipped`` (``url`` and
        ``note``, at most :data:`LISTED`) and ``pages_skipped_count``; ``None`` when
        ``root`` holds no record.
    """
    st = read_state(root)
    if st is None:
        return None
    errors = dict(st.get("page_errors") or {})
    skipped = dict(st.get("skipped") or {})
    return {
        "sitemap": st.get("url"),
        "pages": len(st.get("pages") or {}),
        "fetched_at": st.get("fetched_at"),
        "fetch_started": st.get("fetch_started"),
        "failing_since": st.get("failing_since"),
        "fetch_error": st.get("error"),
        "page_errors": [{"url": u, "error": e} for u, e in list(errors.items())[:LISTED]],
        "page_errors_count": len(errors),
        "pages_skipped": [{"url": u, "note": n} for u, n in list(skipped.items())[:LISTED]],
        "pages_skipped_count": len(skipped),
        "robots_errors": [
            {"url": u, "error": e} for u, e in (st.get("robots_errors") or {}).items()
        ],
    }


def site_empty_note(url: str | None, st: Mapping[str, Any] | None) -> str:
    """Why a site's last good fetch kept no page, from its fetch record ``st``.

    Args:
        url: the sitemap's URL (without user info); ``None``: not recorded yet.
        st: the record (:func:`read_state`): ``pages``, ``skipped`` and ``page_errors``
            (URL -> why), ``robots_errors``.

    Returns:
        One line, e.g. ``sitemap https://example.org/sitemap.xml lists 3 page(s), none
        kept: 3 disallowed by robots.txt (`ingestd status` lists them)``.
    """
    st = st or {}
    site = f"sitemap {url or '(not fetched yet)'}"
    skipped = dict(st.get("skipped") or {})
    failing = len(st.get("page_errors") or {})
    listed = len(st.get("pages") or {}) + len(skipped) + failing
    if not listed:
        return f"{site} lists no page its include globs select"
    disallowed = sum(1 for note in skipped.values() if str(note).startswith("disallowed by"))
    parts = [
        f"{disallowed} disallowed by robots.txt" if disallowed else "",
        f"{len(skipped) - disallowed} skipped" if len(skipped) > disallowed else "",
        f"{failing} failing" if failing else "",
        "robots.txt cannot be read (no page asked for)" if st.get("robots_errors") else "",
    ]
    why = ", ".join(p for p in parts if p) or "none found in the pages kept"
    return f"{site} lists {listed} page(s), none kept: {why} (`ingestd status` lists them)"


#: A sitemap source's folder name (:func:`~ingestd.daemon.sources.mirror.folder_name`).
_FOLDER = re.compile(r".+-[0-9a-f]{16}")


class SitemapStatus:
    """What ``status`` and ``sources`` show of a sitemap source: its site, fetches, pages."""

    def recorded(self, root: Path) -> dict[str, Any] | None:
        """:func:`site_status` of ``root`` and ``root_missing`` (never fetched).

        A source not tried yet has no record, only its folder's place in the state dir
        (:func:`site_dir`): it is shown as a sitemap not fetched yet, not as a folder.
        """
        site = site_status(root)
        if site is None:
            if root.parent.name != "sitemap" or not _FOLDER.fullmatch(root.name):
                return None
            site = {
                "sitemap": None,
                "pages": 0,
                "fetched_at": None,
                "fetch_started": None,
                "failing_since": None,
            }
        return {**site, "root_missing": not site["fetched_at"]}

    def shows(self, s: Mapping[str, Any]) -> bool:
        """Whether ``s`` is a sitemap source's entry (it has ``sitemap``, maybe ``None``)."""
        return "sitemap" in s

    def where_lines(self, s: Mapping[str, Any]) -> Iterator[str]:
        """The sitemap (its pages are kept in the state dir)."""
        yield f"  sitemap: {s.get('sitemap') or '(its URL is in the config)'}"

    def lines(self, s: Mapping[str, Any], when: When) -> Iterator[str]:
        """Its fetches, its pages, and the pages that failed or were skipped."""
        yield from fetch_lines(s, when)
        yield (
            f"  {s.get('pages', 0)} page(s) kept, {s.get('pages_skipped_count', 0)} skipped, "
            f"{s.get('page_errors_count', 0)} failing"
        )
        for e in s.get("robots_errors") or []:
            yield (
                f"  ROBOTS.TXT FAILING {e['url']}: {e['error']}; no page of its site was "
                "asked for, the last copies are kept"
            )
        for e in s.get("page_errors") or []:
            yield f"  page failing {e['url']}: {e['error']}; its last copy is kept"
        for p in s.get("pages_skipped") or []:
            yield f"  page skipped {p['url']}: {p['note']}"

    def empty_note(self, s: Mapping[str, Any]) -> str:
        """What became of the pages of the last fetch (:func:`site_empty_note`)."""
        return site_empty_note(s.get("sitemap"), read_state(Path(s["root"])))

    def where(self, row: Mapping[str, Any]) -> str:
        """The sitemap's URL."""
        return str(row.get("sitemap") or row["root"])

    def sources_lines(self, row: Mapping[str, Any], when: When) -> Iterator[str]:
        """One line: its pages, when it was fetched, and what fails."""
        fetched = when(row.get("fetched_at"))
        line = f"{row['source']}\t{row.get('pages', 0)} pages\tfetched {fetched}"
        if row.get("failing_since"):
            line += f"\tFETCH FAILING: {row.get('fetch_error')}"
        if row.get("page_errors_count"):
            line += f"\t{row['page_errors_count']} page(s) failing"
        yield line


#: The sitemap kind's status part.
SITEMAP_STATUS = SitemapStatus()
