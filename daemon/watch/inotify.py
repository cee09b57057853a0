"""Which folders the kernel really watches for this process, and why one cannot be.

watchdog sets a recursive watch folder by folder. A folder it cannot watch — the
per-user limit ``fs.inotify.max_user_watches`` is reached (``ENOSPC``), or permission
is denied (``EACCES``) — is skipped *silently* by some versions: watchdog 7's
``InotifyWatchGroup._add_callback`` swallows every error below the watched root and
``InotifyFD._raise_error`` ignores ``EACCES`` altogether; older versions did the same
for folders created after the watch was set. Changes in such a folder are never seen.

So ingestd asks the kernel rather than watchdog: ``/proc/self/fdinfo/FD`` of an inotify
descriptor lists one ``inotify wd:... ino:... sdev:...`` line per watch (Linux
``Documentation/filesystems/proc.rst``, "inotify"), and a folder is watched exactly
when its inode is listed. Inodes are compared without the device: ``stat`` on btrfs
subvolumes and overlayfs reports another ``st_dev`` than the kernel's ``sdev``. When a
folder is not watched, :func:`probe` tries a watch of its own to tell why.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

__all__ = ["LIMIT_KEY", "add_watch_errno", "probe", "reason_for", "watched_inodes"]

#: The sysctl that bounds inotify watches per user (the usual cause of ``ENOSPC``).
LIMIT_KEY = "fs.inotify.max_user_watches"
_LIMIT_FILE = Path("/proc/sys/fs/inotify/max_user_watches")
_IN_ONLYDIR = 0x01000000
_IN_CREATE = 0x00000100
_IN_CLOEXEC = 0o2000000


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
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as f:
                lines = f.read().splitlines()
        except OSError:
            continue  # closed meanwhile
        found = True
        for line in lines:
            if line.startswith("inotify "):
                for field in line.split():
                    if field.startswith("ino:"):
                        out.add(int(field[4:], 16))
                        break
    return out if found else None


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so.6", use_errno=True)
    except OSError:
        return None


def add_watch_errno(path: str | Path) -> int:
    """Try an inotify watch on folder ``path`` with a fresh instance, then drop it.

    Returns:
        0 when the watch could be set, else the ``errno`` of ``inotify_init1`` or
        ``inotify_add_watch`` (``ENOSPC``: the watch limit; ``EACCES``; ``EMFILE``:
        the instance limit; ``ENOSYS`` when inotify is not available).
    """
    libc = _libc()
    if libc is None or not hasattr(libc, "inotify_init1"):
        return errno.ENOSYS
    fd = libc.inotify_init1(_IN_CLOEXEC)
    if fd < 0:
        return ctypes.get_errno() or errno.ENOSYS
    try:
        wd = libc.inotify_add_watch(fd, os.fsencode(path), _IN_ONLYDIR | _IN_CREATE)
        if wd < 0:
            return ctypes.get_errno() or errno.EINVAL
        return 0
    finally:
        os.close(fd)


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
        try:
            limit = _LIMIT_FILE.read_text().strip()
        except OSError:
            limit = "?"
        return f"the inotify watch limit is reached ({LIMIT_KEY} = {limit})"
    if err in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if err == errno.EMFILE:
        return "the inotify instance limit (fs.inotify.max_user_instances) is reached"
    return os.strerror(err)
