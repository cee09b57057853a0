"""What a sync could not do, kept for ``status`` and for later tries.

Two kinds, both per source and never silent:

* *retried*: a file that vanished or could not be read mid-sync (a file locked by an
  editor, a file replaced while it was read). It is tried again with back-off
  (``files.retry_initial_s`` doubling up to ``files.retry_max_s``), never treated as
  deleted; one log line per change of its state.
* *skipped*: what a scan left out (a name that is not UTF-8, a folder that cannot be
  read, a document that could not even be recorded as failed), by display path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ingestd.daemon.config import FilesConfig
from ingestd.daemon.sources.base import Scan, display_path
from ingestd.daemon.sync.backoff import Backoff
from ingestd.daemon.sync.types import Plan, SyncResult

__all__ = ["ReadFailures", "within"]

logger = logging.getLogger(__name__)


def within(key: str, top: str) -> bool:
    """Whether skipped entry ``key`` (a display path, folders end with ``/``) is under ``top``."""
    top = top.strip("/")
    return not top or key.rstrip("/") == top or key.startswith(top + "/")


class ReadFailures:
    """Files to read again later, and entries scans skipped, per source.

    Args:
        files: the ``files`` config section (the retry back-off, in seconds).
        now: the clock, seconds since the epoch.

    Attributes:
        retry: files that could not be read, by ``(source, path)``.
        skipped: per source, display path -> why it was left out.
        refusals: per source, path -> why the store refused to write its points, until
            a later write of it succeeds: the daemon is unhealthy meanwhile.
    """

    def __init__(self, files: FilesConfig, now: Callable[[], float]) -> None:
        self.now = now
        self.retry: Backoff[tuple[str, str]] = Backoff(files.retry_initial_s, files.retry_max_s)
        self.skipped: dict[str, dict[str, str]] = {}
        self.refusals: dict[str, dict[str, str]] = {}

    def refused(self, source: str, rel: str, error: str) -> None:
        """The store refused to write the points of ``rel`` (``error`` says why)."""
        self.refusals.setdefault(source, {})[rel] = error

    def accepted(self, source: str, rel: str) -> None:
        """The points of ``rel`` were written: a refusal of it is over."""
        book = self.refusals.get(source)
        if book and book.pop(rel, None) is not None:
            logger.info("source %s: %s written; the store accepts it now", source, rel)
            if not book:
                del self.refusals[source]

    def unreadable(self, source: str, rel: str, error: str) -> None:
        """Record a failed read of ``rel``; log only when its state changes."""
        if self.retry.failed((source, rel), error, self.now()):
            logger.warning(
                "source %s: %s; tried again after %.0f s, then less and less often (every "
                "%.0f s at most); `ingestd status` lists it",
                source,
                error,
                self.retry.delay(1),
                self.retry.cap,
            )

    def readable(self, source: str, rel: str) -> None:
        """``rel`` was read: stop retrying it (one log line if it had failed)."""
        failing = self.retry.succeeded((source, rel))
        if failing is not None:
            logger.info(
                "source %s: %s can be read again (after %d failed tries)",
                source,
                rel,
                failing.attempts,
            )

    def settle(self, plan: Plan, res: SyncResult) -> None:
        """Forget failed reads that the plan covered and that did not fail again.

        A path that vanished for good is no longer retried; one that failed again
        keeps its back-off.
        """
        failed = set(res.retry)
        for source, rel in self.retry:
            if source != plan.source or rel in failed or res.interrupted:
                continue
            if plan.scan or any(within(rel, top) for top in plan.scope):
                if self.retry.succeeded((source, rel)) is not None:
                    logger.info("source %s: %s is no longer retried (gone or read)", source, rel)

    def note_skipped(self, source: str, scope: list[str] | None, found: Scan) -> None:
        """Update what ``source`` skipped for the ``scope`` observed (``None``: all).

        Logs one warning when an entry is first skipped (or for another reason), and
        one line when it no longer is.
        """
        now = dict(found.skipped)
        for folder, error in found.unreadable.items():
            key = display_path(folder) + "/" if folder else "./"
            now[key] = f"folder cannot be read ({error}): nothing in it is indexed or deleted"
        book = self.skipped.setdefault(source, {})
        tops = None if scope is None else [display_path(p) for p in scope]
        for key in list(book):
            if key not in now and (tops is None or any(within(key, t) for t in tops)):
                del book[key]
                logger.info("source %s: %s is no longer skipped", source, key)
        for key, reason in now.items():
            if book.get(key) != reason:
                logger.warning("source %s: skipping %s: %s", source, key, reason)
                book[key] = reason

    def skip(self, source: str, rel: str, reason: str) -> None:
        """Record that document ``rel`` could not even be recorded (a ``status`` entry)."""
        self.skipped.setdefault(source, {})[display_path(rel)] = reason

    def skipped_entries(self, source: str) -> list[dict[str, str]]:
        """What scans of ``source`` left out: ``{"path", "reason"}`` (display paths)."""
        return [{"path": k, "reason": v} for k, v in sorted(self.skipped.get(source, {}).items())]

    def retrying(self, source: str) -> list[dict[str, Any]]:
        """Files of ``source`` that could not be read: ``path``, error, tries, next try."""
        now = self.now()
        return [
            {"path": rel, **f.as_dict(now)}
            for (s, rel), f in sorted(self.retry.items())
            if s == source
        ]
