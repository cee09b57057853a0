"""ingestd's own inotify watcher of one source: one descriptor, one reader thread.

Why not watchdog's observer: its recursive watch cannot leave out a subtree, so a
checkout's ``node_modules/`` or ``.venv/`` costs a watch per folder (tens of
thousands), and without an ``event_filter`` its mask includes ``IN_OPEN`` and
``IN_CLOSE_NOWRITE``, so merely walking the tree overflows the event queue, after which
watchdog walks the tree again: a loop that needs no change to go on. watchdog's
non-recursive schedules cost a thread each. Here one thread per source waits in
``poll`` on the descriptor (and a wake-up pipe), reads every queued event, and hands
them to :class:`~ingestd.daemon.watch.folders.FolderWatches`, which watches only the
folders that can hold documents. Measured with ``bench/watch.py``: 50 documents in 15
folders beside 50,000 ignored folders (250,000 files) cost 15 watches, 174 MB of RSS
and 0.03 CPU seconds per idle minute, the same as the documents alone; setting the
watches takes 3-17 ms either way.

A rename's two halves (``IN_MOVED_FROM``, ``IN_MOVED_TO``) are queued one after the
other; when a read ends between them, the reader waits up to :data:`MOVE_GRACE_S` for
the second before it counts the folder as moved out.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.sources.walk import walk_folders
from ingestd.daemon.watch import watched
from ingestd.daemon.watch.coverage import WatchStats
from ingestd.daemon.watch.folders import FolderWatches
from ingestd.daemon.watch.inotify import Inotify, fdinfo_inodes

__all__ = ["MOVE_GRACE_S", "SETTLE_S", "InotifyEmitter"]

logger = logging.getLogger(__name__)

#: Longest the reader waits for the ``IN_MOVED_TO`` half of a folder's rename, in
#: seconds (both halves are queued by the same ``rename(2)``; a read may end between).
MOVE_GRACE_S = 0.05
#: Longest a folder found unwatched is looked at again before it counts (it may have
#: been created a moment ago: its event is on its way), in seconds.
SETTLE_S = 1.0


class InotifyEmitter:
    """Watches one source with inotify; forwards changed paths to ``put``.

    Args:
        flt: the source's filter (which folders are watched, which files reported).
        put: ``(source, relative path)``, called on the reader thread (must be quick
            and thread-safe).
        on_lost: ``(source, reason)`` when events may have been lost (the caller
            rescans the source), called on the reader thread.

    Attributes:
        gate: held by the reader while it handles events; a test that holds it
            stalls the reader (the kernel queue then fills up).
    """

    backend = "inotify"

    def __init__(
        self,
        flt: SourceFilter,
        put: Callable[[str, str], None],
        on_lost: Callable[[str, str], None],
    ) -> None:
        self.flt = flt
        self.source = flt.source.name
        self._put = put
        self._on_lost = on_lost
        self.gate = threading.Lock()
        self._lock = threading.Lock()  # the watched set: reader vs. status and checks
        self._kernel: Inotify | None = None
        self._folders: FolderWatches | None = None
        self._wake_r, self._wake_w = -1, -1
        self._thread = threading.Thread(
            target=self._run, name=f"ingestd-watch-{self.source}"[:60], daemon=True
        )

    def start(self) -> None:
        """Set the watches (before returning) and start the reader thread.

        Raises:
            OSError: no inotify instance (``EMFILE``: ``fs.inotify.max_user_instances``)
                or the root cannot be watched (``ENOSPC``, ``EACCES``, ...).
        """
        kernel = Inotify()
        folders = FolderWatches(self.flt, kernel, self._put, self._on_lost)
        try:
            t0 = time.monotonic()
            with self._lock:
                folders.start()
        except BaseException:
            kernel.close()
            raise
        self._kernel, self._folders = kernel, folders
        logger.debug(
            "source %s: %d folder(s) watched, %d ignored, in %.3f s",
            self.source,
            len(folders.watched),
            len(folders.ignored),
            time.monotonic() - t0,
        )
        self._wake_r, self._wake_w = os.pipe()
        self._thread.start()

    def stop(self) -> None:
        """Stop the reader thread and close the descriptor (the kernel drops the watches)."""
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1
        if self._kernel is not None:
            self._kernel.close()

    def alive(self) -> bool:
        """Whether the reader thread runs."""
        return self._thread.is_alive()

    # -- the reader thread -------------------------------------------------------------------------

    def _run(self) -> None:
        assert self._kernel is not None and self._folders is not None
        kernel, folders = self._kernel, self._folders
        try:
            # poll(2), not select(2): a daemon may hold descriptors past FD_SETSIZE
            waiting = select.poll()
            waiting.register(kernel.fd, select.POLLIN)
            waiting.register(self._wake_r, select.POLLIN)
            grace = select.poll()
            grace.register(kernel.fd, select.POLLIN)
            while True:
                ready = {fd for fd, _ in waiting.poll()}
                if self._wake_r in ready:
                    return
                with self.gate:
                    self._drain(kernel, folders, grace)
        except Exception:
            logger.exception("the watcher of source %s stopped", self.source)

    def _drain(self, kernel: Inotify, folders: FolderWatches, grace: select.poll) -> None:
        """Handle every queued event, waiting briefly for the halves of renames."""
        while True:
            events = kernel.read()
            if not events:
                if not folders.moves_pending:
                    break
                if not grace.poll(MOVE_GRACE_S * 1000):
                    break
                continue
            with self._lock:
                folders.handle(events)
        with self._lock:
            folders.end_batch()

    # -- what is watched ---------------------------------------------------------------------------

    def stats(self) -> WatchStats:
        """Folders watched, ignored and unwatchable, and events read."""
        f = self._folders
        if f is None:
            return WatchStats(self.backend, 0, 0, 0, 0)
        with self._lock:
            return WatchStats(
                self.backend, len(f.watched), len(f.ignored), len(f.unwatchable), f.events
            )

    def watched_folders(self) -> list[str]:
        """Relative paths of the watched folders (``""``: the root), in order."""
        if self._folders is None:
            return []
        with self._lock:
            return self._folders.watched.under("")

    def unwatched_folders(self, under: Iterable[str] = ("",)) -> dict[str, str]:
        """Folders below ``under`` that can hold documents and have no watch, and why.

        What the watcher recorded (``ENOSPC``, ``EACCES``) is checked against the
        kernel (``/proc/self/fdinfo`` of this descriptor): a folder missing there that
        was created a moment ago is looked at again for up to :data:`SETTLE_S`.

        Returns:
            Relative folder path (``""``: the root) -> why it is not watched.
        """
        if self._folders is None or self._kernel is None:
            return {"": "not watched (the watcher is not running)"}
        with self._lock:
            known = {rel: err for rel, err in self._folders.unwatchable.items()}
        out: dict[str, str] = {}
        late: dict[str, int] = {}
        inodes = fdinfo_inodes(self._kernel.fd)
        for top in sorted(set(under)):
            for rel, ino in walk_folders(self.flt, top):
                if rel in known:
                    out[rel] = watched.reason_for(known[rel] or errno.EINVAL)
                elif inodes is not None and ino not in inodes:
                    late[rel] = ino
        deadline = time.monotonic() + SETTLE_S
        while late and time.monotonic() < deadline:
            time.sleep(0.05)
            inodes = fdinfo_inodes(self._kernel.fd) or set()
            late = {rel: ino for rel, ino in late.items() if ino not in inodes}
        for rel in late:
            reason = watched.probe(Path(self.flt.root) / rel)
            if reason.startswith("not watched"):
                reason = "not watched (no watch was set on it)"
            out[rel] = reason
        return out
