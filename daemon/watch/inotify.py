"""Which folders the kernel really watches for this process, and why one cannot be.

ingestd sets its own watches (:mod:`~ingestd.daemon.watch.emitter`) and records the
folders it could not watch; the kernel is still asked, so that ``status`` reports what
is true rather than what was meant. ``/proc/self/fdinfo/FD`` of an inotify descriptor
lists one ``inotify wd:... ino:... sdev:...`` line per watch (Linux
``Documentation/filesystems/proc.rst``, "inotify"), and a folder is watched exactly
when its inode is listed. Inodes are compared without the device: ``stat`` on btrfs
subvolumes and overlayfs reports another ``st_dev`` than the kernel's ``sdev``. When a
folder is not watched, :func:`probe` tries a watch of its own to tell why: the
per-user limit ``fs.inotify.max_user_watches`` is reached (``ENOSPC``), or permission
is denied (``EACCES``).

The watchdog fallback (:mod:`~ingestd.daemon.watch.fallback`), when made to run on
inotify, is checked through :func:`watched_inodes` (every inotify descriptor of the
process): watchdog 7's ``InotifyWatchGroup._add_callback`` swallows every error below
the watched root, and ``InotifyFD._raise_error`` ignores ``EACCES``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ingestd.daemon.watch.kernel import (
    IN_CREATE,
    IN_ONLYDIR,
    Inotify,
    fdinfo_inodes,
    max_user_watches,
)

__all__ = ["LIMIT_KEY", "add_watch_errno", "probe", "reason_for", "watched_inodes"]

#: The sysctl that bounds inotify watches per user (the usual cause of ``ENOSPC``).
LIMIT_KEY = "fs.inotify.max_user_watches"


def watched_inodes() -> set[int] | None:
    """Inode numbers watched by the inotify descriptors of this process.

    Returns:
        The inodes, or ``None`` when ``/proc`` cannot tell (not Linux, no ``/proc``,
        or no inotify descriptor open: watching is then not done by inotify).
    """
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    out: set[int] = set()
    found = False
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
        except OSError:
            continue  # closed meanwhile
        inodes = fdinfo_inodes(int(fd))
        if inodes is not None:
            found = True
            out |= inodes
    return out if found else None


def add_watch_errno(path: str | Path) -> int:
    """Try an inotify watch on folder ``path`` with a fresh instance, then drop it.

    Returns:
        0 when the watch could be set, else the ``errno`` of ``inotify_init1`` or
        ``inotify_add_watch`` (``ENOSPC``: the watch limit; ``EACCES``; ``EMFILE``:
        the instance limit; ``ENOSYS`` when inotify is not available).
    """
    try:
        ino = Inotify()
    except OSError as exc:
        return exc.errno or errno.ENOSYS
    try:
        ino.add_watch(os.fspath(path), IN_ONLYDIR | IN_CREATE)
        return 0
    except OSError as exc:
        return exc.errno or errno.EINVAL
    finally:
        ino.close()


def probe(path: str | Path) -> str:
    """Why folder ``path`` is not watched, from a watch tried with :func:`add_watch_errno`.

    Returns:
        A short reason: the watch limit (naming :data:`LIMIT_KEY` and its value),
        permission denied, another error, or ``"not watched (a watch can be set
        now)"`` when the probe succeeds (the folder appeared after the watch was set,
        or the limit was raised since).
    """
    return reason_for(add_watch_errno(path))


def reason_for(err: int) -> str:
    """A short reason for an ``errno`` of ``inotify_add_watch`` (0: it succeeded)."""
    if err == 0:
        return "not watched (a watch can be set now)"
    if err == errno.ENOSPC:
        limit = max_user_watches()
        return f"the inotify watch limit is reached ({LIMIT_KEY} = {limit or '?'})"
    if err in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if err == errno.EMFILE:
        return "the inotify instance limit (fs.inotify.max_user_instances) is reached"
    return os.strerror(err)
