"""Watch coverage: which folders of each source are not watched, and why.

A source whose folders are not all watched is *degraded*: changes there reach the
store only through a rescan, which the daemon runs every ``watch.unwatched_rescan_s``
seconds while the source stays degraded (and it tries to set the watches again each
time). ``status`` lists the folders and reports the daemon unhealthy.

Logging follows the state, not the checks: one error when a source becomes degraded
(with the fix for its reasons: the watch limit that was reached, named as
:func:`~ingestd.daemon.watch.watched.watch_limit` finds it, or folders the daemon's
user may not read), one warning when more folders join, one line when every folder is
watched again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ingestd.daemon.sources.base import display_path
from ingestd.daemon.watch.watched import watch_limit

__all__ = ["WatchCoverage", "WatchStats", "advice_for", "folder_key"]

logger = logging.getLogger(__name__)


def folder_key(rel: str) -> str:
    """How a folder is listed: its display path and ``/`` (``./`` for the root)."""
    return display_path(rel) + "/" if rel else "./"


def advice_for(reasons: Iterable[str]) -> str:
    """What to do about folders that cannot be watched, for these reasons of theirs."""
    reasons = set(reasons)
    advice = []
    if any(r.startswith("the inotify watch limit") for r in reasons):
        key, _ = watch_limit()
        advice.append(
            f"Raise {key} (e.g. `sysctl -w {key}=524288`) or exclude big folders from the source"
        )
    if "permission denied" in reasons:
        advice.append(
            "Let the daemon's user read and enter those folders (e.g. `setfacl -R -m "
            "u:ingestd:rX FOLDER`) or exclude them from the source"
        )
    if not advice:
        advice.append("Exclude those folders from the source, or check them")
    return ". ".join(advice)


def _within(key: str, top: str) -> bool:
    top = top.strip("/")
    return not top or key.rstrip("/") == top or key.startswith(top + "/")


@dataclass(frozen=True, slots=True)
class WatchStats:
    """What the watcher of one source holds (``status`` shows it per source).

    Attributes:
        backend: ``inotify`` (ingestd's own watches), ``watchdog`` (watchdog's
            platform observer, recursive) or ``polling`` (watchdog's polling observer).
        watched: folders with a watch, or ``None`` when the backend does not say.
        ignored: folders deliberately not watched because no document can be in them
            (built-in ignored names, ``exclude``, ``.gitignore``, the state dir), or
            ``None`` when the backend does not say. Nothing below them is entered, so
            each counts once however big it is (a ``node_modules/`` is one).
        unwatchable: folders that could hold documents but could not be watched.
        events: inotify events read since the watcher started (``None``: not inotify).
    """

    backend: str
    watched: int | None = None
    ignored: int | None = None
    unwatchable: int = 0
    events: int | None = None


class WatchCoverage:
    """Unwatched folders per source (see the module docstring).

    Args:
        rescan_s: the rescan period of a degraded source, in seconds (for the log).
    """

    def __init__(self, rescan_s: float) -> None:
        self.rescan_s = rescan_s
        self._folders: dict[str, dict[str, str]] = {}

    def update(self, source: str, found: Mapping[str, str], under: Iterable[str] = ("",)) -> None:
        """Record a check of ``source`` below the folders ``under``.

        Args:
            source: the source name.
            found: relative folder path -> why it is not watched, for the folders
                checked (those below ``under``); an empty mapping: all are watched.
            under: the relative folders the check covered (``""``: the whole source).
        """
        before = self._folders.get(source, {})
        tops = [display_path(t) for t in under]
        now = {k: v for k, v in before.items() if not any(_within(k, t) for t in tops)}
        now.update({folder_key(rel): reason for rel, reason in found.items()})
        self._set(source, before, now)

    def unwatched_source(self, source: str, reason: str) -> None:
        """Record that no watch of ``source`` could be set at all (its root failed)."""
        self._set(source, self._folders.get(source, {}), {"./": reason})

    def forget(self, source: str) -> None:
        """Drop what is known of ``source`` (removed, or its root is missing)."""
        self._folders.pop(source, None)

    def folders(self, source: str) -> list[dict[str, str]]:
        """``{"path", "reason"}`` of each unwatched folder of ``source``."""
        return [{"path": k, "reason": v} for k, v in sorted(self._folders.get(source, {}).items())]

    def degraded(self) -> list[str]:
        """Sources with folders that are not watched."""
        return sorted(self._folders)

    def is_degraded(self, source: str) -> bool:
        """Whether ``source`` has folders that are not watched."""
        return source in self._folders

    def _set(self, source: str, before: dict[str, str], now: dict[str, str]) -> None:
        if not now:
            if before:
                logger.info("source %s: every folder is watched again", source)
            self._folders.pop(source, None)
            return
        self._folders[source] = now
        new = sorted(k for k, v in now.items() if before.get(k) != v)
        if not new:
            return
        example = f"{new[0]} ({now[new[0]]})"
        if not before:
            logger.error(
                "source %s: cannot watch %d folder(s), e.g. %s: changes there are found "
                "only by a rescan every %g s. %s",
                source,
                len(now),
                example,
                self.rescan_s,
                advice_for(now.values()),
            )
        else:
            logger.warning(
                "source %s: %d more folder(s) cannot be watched, e.g. %s",
                source,
                len(new),
                example,
            )
