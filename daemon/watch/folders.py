"""Which folders of a source hold an inotify watch, and how that set follows the tree.

A folder gets a watch exactly when a scan would enter it (:func:`prunes` is false): the
built-in ignored names (``.git``, ``node_modules``, virtualenvs, ``__pycache__``, ...),
``exclude`` globs, folders ignored by ``.gitignore`` when the source honours them, the state dir
and folder names that are not UTF-8 get none, and nothing below them is entered. Each
watch is non-recursive and asks only for what can change the index (:data:`DIR_MASK`):
never ``IN_OPEN``, ``IN_ACCESS`` or ``IN_CLOSE_NOWRITE``, so a scan, a ``git status``
or a build that only reads queues no event, and no ``IN_MODIFY`` (one per ``write``):
``IN_CLOSE_WRITE`` says a file was written. A ``chmod`` or a write through a file
kept open is found by the periodic rescan.

What each event does (:meth:`FolderWatches.handle`; ``put`` hands a relative path to
the batcher, whose batch the planner compares with disk and manifest):

================================  ======================================================
event                             action
================================  ======================================================
file created/written/deleted,     ``put(path)`` when the filter accepts it
moved from/to
``.gitignore`` (any of those)     forget its rules, :meth:`~FolderWatches.refresh` its
                                  folder (watches added and dropped), ``put(folder)``
folder created                    watch it, *then* list it (a file created meanwhile is
                                  seen by the event or by the listing), its sub-folders
                                  likewise; ``put(folder)``
folder deleted                    forget its watch; ``put(folder)``
folder moved from                 remember it by rename cookie; ``put(old)``
folder moved to, cookie known     rename the watches (they follow the inode), refresh
                                  (the new place may ignore parts); ``put(new)``
folder moved to, no cookie        as created (moved in from outside)
moved from, no match by the end   moved out: remove its watches (they would go on
of the batch                      reporting from wherever it went)
root deleted, moved, unmounted    ``on_lost``; every later event is dropped
``IN_Q_OVERFLOW``                 refresh every watch, then one ``on_lost`` per overflow
================================  ======================================================

The set is only ever *refreshed* (every folder that can hold documents is watched
again: ``inotify_add_watch`` on a watched inode returns its descriptor, no event; the
watches of folders not seen are removed), never dropped and rebuilt: removing N
watches queues N ``IN_IGNORED`` events, which would overflow a big tree again.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterable
from typing import Protocol

from ingestd.daemon.sources.base import name_problem
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.watch.inotify import (
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_DONT_FOLLOW,
    IN_EXCL_UNLINK,
    IN_IGNORED,
    IN_ISDIR,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_ONLYDIR,
    IN_Q_OVERFLOW,
    IN_UNMOUNT,
    RawEvent,
)
from ingestd.daemon.watch.paths import PathIndex

__all__ = [
    "DIR_MASK",
    "OVERFLOW",
    "ROOT_GONE",
    "ROOT_MASK",
    "FolderWatches",
    "Kernel",
    "prunes",
]

logger = logging.getLogger(__name__)

#: The mask of every watched folder: what can change which documents exist or their
#: bytes (``0x070003c8``).
DIR_MASK = (
    IN_CREATE
    | IN_DELETE
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
#: The root's mask: it has no watched parent to report its own deletion or move
#: (``0x07000fc8``).
ROOT_MASK = DIR_MASK | IN_DELETE_SELF | IN_MOVE_SELF

#: ``on_lost`` reason after ``IN_Q_OVERFLOW`` (the service counts overflows by it).
OVERFLOW = "the inotify event queue overflowed"
#: ``on_lost`` reason when the root itself is gone.
ROOT_GONE = "the source root was deleted, moved or unmounted"


class Kernel(Protocol):
    """The two calls :class:`FolderWatches` makes (see :class:`.kernel.Inotify`)."""

    def add_watch(self, path: str, mask: int) -> int:
        """Watch ``path``; returns the watch descriptor or raises ``OSError``."""
        ...

    def rm_watch(self, wd: int) -> None:
        """Remove watch ``wd``."""
        ...


def prunes(flt: SourceFilter, rel: str) -> bool:
    """Whether folder ``rel`` gets no watch and is not entered (as a scan skips it)."""
    if not rel:
        return False
    return name_problem(rel.rpartition("/")[2]) is not None or flt.ignores_dir(rel)


def _join(base: str, name: str) -> str:
    return f"{base}/{name}" if base else name


class FolderWatches:
    """The watches of one source on one inotify instance (see the module docstring).

    Not thread-safe: the emitter calls it from its reader thread, under its lock.

    Args:
        flt: the source's filter.
        kernel: sets and removes watches.
        put: ``(source, relative path)`` of something that changed.
        on_lost: ``(source, reason)`` when events may have been lost.

    Attributes:
        watched: relative folder path -> watch descriptor.
        ignored: folders deliberately not watched (not entered: nothing below them is
            counted).
        unwatchable: folders that can hold documents but got no watch -> ``errno``
            (``ENOSPC``: ``fs.inotify.max_user_watches``; ``EACCES``).
        overflows: ``IN_Q_OVERFLOW`` events handled.
        events: events handled.
        root_gone: the root was deleted, moved or unmounted; events are dropped.
    """

    def __init__(
        self,
        flt: SourceFilter,
        kernel: Kernel,
        put: Callable[[str, str], None],
        on_lost: Callable[[str, str], None],
    ) -> None:
        self.flt = flt
        self.source = flt.source.name
        self.root = os.path.realpath(flt.root)
        self.kernel = kernel
        self._put = put
        self._on_lost = on_lost
        self.watched: PathIndex[int] = PathIndex()
        self.ignored: PathIndex[bool] = PathIndex()
        self.unwatchable: PathIndex[int] = PathIndex()
        self._by_wd: dict[int, str] = {}
        self._moved_from: dict[int, str] = {}  # rename cookie -> folder moved away
        self.overflows = 0
        self.events = 0
        self.root_gone = False

    # -- the watched set -------------------------------------------------------------------------

    def start(self) -> None:
        """Watch the root and every folder below it that can hold documents.

        Raises:
            OSError: the root cannot be watched (its ``errno``: ``ENOSPC``, ``EACCES``,
                ``ENOENT``, ...).
        """
        self.refresh("")
        if "" not in self.watched:
            err = self.unwatchable.get("") or errno.ENOENT
            raise OSError(
                err, f"cannot watch the root of source {self.source}: {os.strerror(err)}", self.root
            )

    def refresh(self, top: str) -> None:
        """Make the watches at and below folder ``top`` match the tree and the filter.

        Every folder that can hold documents is watched (again: the kernel returns the
        existing descriptor of a watched inode, so a path that changed unseen is fixed);
        watches of folders no longer there, or now ignored, are removed.
        """
        before = {rel: self.watched.get(rel) for rel in self.watched.under(top)}
        self.ignored.drop(top)
        self.unwatchable.drop(top)
        seen = self._walk(top)
        live = set(seen.values())
        for rel, wd in before.items():
            if rel not in seen and wd is not None:
                self._unset(rel, wd)
                if wd not in live:
                    self.kernel.rm_watch(wd)

    def _walk(self, top: str) -> dict[str, int]:
        """Watch ``top`` and the folders below it, parent before child; returns them."""
        seen: dict[str, int] = {}
        stack = [top]
        while stack:
            rel = stack.pop()
            if prunes(self.flt, rel):
                self.ignored[rel] = True
                continue
            wd = self._watch(rel)
            if wd is None:
                continue
            if wd >= 0:
                seen[rel] = wd
            stack.extend(self._subfolders(rel))
        return seen

    def _subfolders(self, rel: str) -> list[str]:
        out = []
        try:
            with os.scandir(os.path.join(self.root, rel) if rel else self.root) as it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            out.append(_join(rel, entry.name))
                    except OSError:
                        continue
        except OSError:
            pass  # vanished (its parent reports it) or unreadable (recorded by _watch)
        return out

    def _watch(self, rel: str) -> int | None:
        """Watch one folder: its descriptor, -1 when it cannot be, ``None`` when gone."""
        path = os.path.join(self.root, rel) if rel else self.root
        try:
            wd = self.kernel.add_watch(path, DIR_MASK if rel else ROOT_MASK)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return None  # gone, or replaced by a file or a symlink
            self.unwatchable[rel] = exc.errno or errno.EINVAL
            logger.debug("source %s: cannot watch %r: %s", self.source, rel, exc)
            return -1
        old = self._by_wd.get(wd)
        if old is not None and old != rel:
            self._unset(old, wd)  # the same inode under a new path: a move not seen
        prev = self.watched.get(rel)
        if prev is not None and prev != wd:
            self._unset(rel, prev)  # another folder now has this path
            self.kernel.rm_watch(prev)
        self.watched[rel] = wd
        self._by_wd[wd] = rel
        return wd

    def _unset(self, rel: str, wd: int) -> None:
        if self.watched.get(rel) == wd:
            self.watched.pop(rel)
        if self._by_wd.get(wd) == rel:
            del self._by_wd[wd]

    def _drop(self, top: str, *, remove: bool) -> None:
        """Forget ``top`` and everything below it; ``remove``: also remove the watches."""
        for rel in self.watched.under(top):
            wd = self.watched.pop(rel)
            if wd is not None:
                self._by_wd.pop(wd, None)
                if remove:
                    self.kernel.rm_watch(wd)
        self.ignored.drop(top)
        self.unwatchable.drop(top)

    def _rename(self, old: str, new: str) -> None:
        """Folder ``old`` is now ``new``: its watches followed the inodes."""
        for rel in self.watched.under(old):
            wd = self.watched.pop(rel)
            if wd is not None:
                moved = new + rel[len(old) :]
                self.watched[moved] = wd
                self._by_wd[wd] = moved
        self.ignored.move(old, new)
        self.unwatchable.move(old, new)

    # -- events ------------------------------------------------------------------------------------

    @property
    def moves_pending(self) -> bool:
        """Folders moved away whose other half (``IN_MOVED_TO``) has not come yet."""
        return bool(self._moved_from)

    def handle(self, events: Iterable[RawEvent]) -> None:
        """Act on events read from the kernel (in order), then on an overflow once.

        An event that cannot be handled is logged once per call and ends in
        ``on_lost`` (the source is rescanned); the rest are handled.
        """
        overflow = unmount = False
        failed: list[tuple[RawEvent, Exception]] = []
        for ev in events:
            self.events += 1
            if self.root_gone:
                continue
            if ev.mask & IN_Q_OVERFLOW:
                overflow = True
                continue
            if ev.mask & IN_UNMOUNT and self._by_wd.get(ev.wd) != "":
                unmount = True  # a file system mounted below the root went away
                continue
            try:
                self._handle(ev)
            except Exception as exc:  # one bad event must not end the watcher
                failed.append((ev, exc))
        if failed:
            bad, error = failed[0]
            logger.error(
                "source %s: %d event(s) could not be handled, e.g. %r; rescanning",
                self.source,
                len(failed),
                bad,
                exc_info=error,
            )
            self._on_lost(self.source, "an event could not be handled")
        if overflow or unmount:
            self._moved_from.clear()  # their other halves may be lost: refresh finds them
            self.refresh("")
            if overflow:
                self.overflows += 1
            self._on_lost(self.source, OVERFLOW if overflow else "a file system was unmounted")

    def end_batch(self) -> None:
        """No more events for now: folders moved away and not back were moved out."""
        for rel in self._moved_from.values():
            self._drop(rel, remove=True)
        self._moved_from.clear()

    def _handle(self, ev: RawEvent) -> None:
        if ev.mask & IN_IGNORED:  # its watch is gone (folder deleted, rm_watch, unmount)
            rel = self._by_wd.pop(ev.wd, None)
            if rel is not None and self.watched.get(rel) == ev.wd:
                self.watched.pop(rel)
            if rel == "":
                self._lost_root()
            return
        base = self._by_wd.get(ev.wd)
        if base is None:
            return  # a watch already removed: its last events
        if ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT):
            if base == "":
                self._lost_root()
            return
        if not ev.name:
            return
        name = os.fsdecode(ev.name)
        rel = _join(base, name)
        if ev.mask & IN_ISDIR:
            self._folder_event(ev, rel)
        elif name == ".gitignore":
            # its rules change which folders are watched and which files are
            # documents: re-plan the whole folder in the same batch
            self.flt.forget_gitignore(base)
            self.refresh(base)
            self._put(self.source, base)
        elif self.flt.accepts(rel):
            self._put(self.source, rel)

    def _folder_event(self, ev: RawEvent, rel: str) -> None:
        if ev.mask & IN_MOVED_FROM:
            if ev.cookie:
                self._moved_from[ev.cookie] = rel
            else:
                self._drop(rel, remove=True)
        elif ev.mask & IN_MOVED_TO:
            old = self._moved_from.pop(ev.cookie, None) if ev.cookie else None
            if old is not None:
                self._rename(old, rel)
            self.refresh(rel)
        elif ev.mask & IN_CREATE:
            self.refresh(rel)  # watch first, then list: nothing created meanwhile is lost
        elif ev.mask & IN_DELETE:
            self._drop(rel, remove=False)  # the kernel removed its watch
        if not self.flt.ignores_dir(rel):
            self._put(self.source, rel)

    def _lost_root(self) -> None:
        if not self.root_gone:
            self.root_gone = True
            self._on_lost(self.source, ROOT_GONE)
