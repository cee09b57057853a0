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

__all__ = [
    "LIMIT_KEY",
    "NS_LIMIT_KEY",
    "add_watch_errno",
    "probe",
    "reason_for",
    "watch_limit",
    "watched_inodes",
]

#: The sysctl that bounds inotify watches per user (the usual cause of ``ENOSPC``).
LIMIT_KEY = "fs.inotify.max_user_watches"
#: The same bound per user namespace (Linux 5.11+): in a container or another user
#: namespace it may be far lower than :data:`LIMIT_KEY`, which shows the initial
#: namespace's value there; the lowest bound of the namespaces up the chain applies.
NS_LIMIT_KEY = "user.max_inotify_watches"
_LIMIT_FILE = Path("/proc/sys/fs/inotify/max_user_watches")
_NS_LIMIT_FILE = Path("/proc/sys/user/max_inotify_watches")
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


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def watch_limit() -> tuple[str, int | None]:
    """The inotify watch limit that binds this process: ``(sysctl key, value)``.

    :data:`NS_LIMIT_KEY` when this user namespace's limit is the lower one (in a
    container: ``user.max_inotify_watches = 100`` while
    ``fs.inotify.max_user_watches`` shows 192536), else :data:`LIMIT_KEY`; the value
    is ``None`` when ``/proc`` cannot tell.
    """
    fs = _read_int(_LIMIT_FILE)
    ns = _read_int(_NS_LIMIT_FILE)
    if ns is not None and (fs is None or ns < fs):
        return NS_LIMIT_KEY, ns
    return LIMIT_KEY, fs


def reason_for(err: int) -> str:
    """A short reason for an ``errno`` of ``inotify_add_watch`` (0: it succeeded).

    ``ENOSPC`` names the limit that applies (:func:`watch_limit`); ``EACCES`` and
    ``EPERM`` (a folder the daemon's user may not read) are told apart from it.
    """
    if err == 0:
        return "not watched (a watch can be set now)"
    if err == errno.ENOSPC:
        key, limit = watch_limit()
        return f"the inotify watch limit is reached ({key} = {'?' if limit is None else limit})"
    if err in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if err == errno.EMFILE:
        return "the inotify instance limit (fs.inotify.max_user_instances) is reached"
    return os.strerror(err)
