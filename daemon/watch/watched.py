"""Which folders the kernel really watches for this process, and why one cannot be.

ingestd sets its own watches (:mod:`~ingestd.daemon.watch.emitter`) and records the
folders it could not watch; the kernel is still asked, so that ``status`` reports what
is true rather than what was meant. ``/proc/self/fdinfo/FD`` of an inotify descriptor
lists one ``inotify wd:... ino:... sdev:...`` line per watch (Linux
``Documentation/filesystems/proc.rst``, "inotify"), and a folder is watched exactly
when its inode is listed. Inodes are compared without the device: ``stat`` on btrfs
subvolumes and overlayfs reports another ``st_dev`` than the kernel's ``sdev``. When a
folder is not watched, :func:`probe` tries a watch of its own to tell why: the
watch limit that binds (:func:`watch_limit`: ``fs.inotify.max_user_watches``, or a
user namespace's lower ``user.max_inotify_watches``) is reached (``ENOSPC``), or
permission is denied (``EACCES``).

The watchdog fallback (:mod:`~ingestd.daemon.watch.fallback`), when made to run on
inotify, is checked through :func:`watched_inodes` (every inotify descriptor of the
process): watchdog 7's ``InotifyWatchGroup._add_callback`` swallows every error below
the watched root, and ``InotifyFD._raise_error`` ignores ``EACCES``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ingestd.daemon.watch.inotify import (
    IN_CREATE,
    IN_ONLYDIR,
    Inotify,
    fdinfo_inodes,
    max_user_watches,
)

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
_NS_LIMIT_FILE = Path("/proc/sys/user/max_inotify_watches")


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
    fs = max_user_watches()
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
