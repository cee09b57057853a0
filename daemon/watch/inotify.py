"""The Linux inotify system calls through ``ctypes``: one descriptor, its watches, its events.

Nothing here decides what to watch (that is :mod:`~ingestd.daemon.watch.folders`); this
module only wraps ``inotify_init1(2)``, ``inotify_add_watch(2)``, ``inotify_rm_watch(2)``
and ``read(2)`` of ``struct inotify_event`` records, and reads a descriptor's watches
back from ``/proc/self/fdinfo`` (Linux ``Documentation/filesystems/proc.rst``,
"inotify": one ``inotify wd:... ino:... sdev:...`` line per watch).

The constants are those of glibc's ``<sys/inotify.h>`` (the same values as the kernel's
``<linux/inotify.h>``). ``IN_CLOEXEC`` and ``IN_NONBLOCK`` are defined there as
``O_CLOEXEC`` and ``O_NONBLOCK``, whose values differ between architectures, so they
are taken from :mod:`os` rather than written down.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import struct
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "IN_ACCESS",
    "IN_ATTRIB",
    "IN_CLOSE_NOWRITE",
    "IN_CLOSE_WRITE",
    "IN_CREATE",
    "IN_DELETE",
    "IN_DELETE_SELF",
    "IN_DONT_FOLLOW",
    "IN_EXCL_UNLINK",
    "IN_IGNORED",
    "IN_ISDIR",
    "IN_MODIFY",
    "IN_MOVED_FROM",
    "IN_MOVED_TO",
    "IN_MOVE_SELF",
    "IN_ONLYDIR",
    "IN_OPEN",
    "IN_Q_OVERFLOW",
    "IN_UNMOUNT",
    "Inotify",
    "RawEvent",
    "available",
    "fdinfo_inodes",
    "libc",
    "max_user_watches",
    "parse_events",
]

# -- <sys/inotify.h>: events a watch can ask for ------------------------------------------------
IN_ACCESS = 0x00000001
"""File was read (never asked for: every reader would queue events)."""
IN_MODIFY = 0x00000002
"""File was written, once per ``write(2)`` (not asked for: ``IN_CLOSE_WRITE`` suffices)."""
IN_ATTRIB = 0x00000004
"""Metadata changed (not asked for: the periodic rescan finds a ``chmod``)."""
IN_CLOSE_WRITE = 0x00000008
"""A file opened for writing was closed."""
IN_CLOSE_NOWRITE = 0x00000010
"""A file not opened for writing was closed (never asked for)."""
IN_OPEN = 0x00000020
"""File or folder was opened (never asked for: a walk opens every folder)."""
IN_MOVED_FROM = 0x00000040
"""An entry was renamed away from the watched folder."""
IN_MOVED_TO = 0x00000080
"""An entry was renamed into the watched folder."""
IN_CREATE = 0x00000100
"""An entry was created in the watched folder."""
IN_DELETE = 0x00000200
"""An entry was deleted from the watched folder."""
IN_DELETE_SELF = 0x00000400
"""The watched folder itself was deleted."""
IN_MOVE_SELF = 0x00000800
"""The watched folder itself was moved."""

# -- <sys/inotify.h>: events the kernel sends unasked ---------------------------------------------
IN_UNMOUNT = 0x00002000
"""The file system of the watched folder was unmounted."""
IN_Q_OVERFLOW = 0x00004000
"""The event queue overflowed (``fs.inotify.max_queued_events``): events were lost."""
IN_IGNORED = 0x00008000
"""The watch was removed (``inotify_rm_watch``, the folder deleted, an unmount)."""

# -- <sys/inotify.h>: flags of inotify_add_watch and of events ------------------------------------
IN_ONLYDIR = 0x01000000
"""Only watch the path if it is a folder."""
IN_DONT_FOLLOW = 0x02000000
"""Do not follow a symbolic link."""
IN_EXCL_UNLINK = 0x04000000
"""No events for children after they were unlinked (files deleted while still open)."""
IN_ISDIR = 0x40000000
"""The event's subject is a folder."""

#: ``struct inotify_event { int wd; uint32_t mask; uint32_t cookie; uint32_t len; char name[]; }``
_HEADER = struct.Struct("iIII")
#: Bytes asked of one ``read(2)``: room for 256 events with the longest names (16 bytes
#: of header plus ``NAME_MAX + 1`` = 256 bytes of name).
READ_SIZE = 256 * (_HEADER.size + 256)
_LIMIT_FILE = Path("/proc/sys/fs/inotify/max_user_watches")


class RawEvent(NamedTuple):
    """One ``struct inotify_event``: watch descriptor, mask, rename cookie, entry name."""

    wd: int
    mask: int
    cookie: int
    name: bytes


def parse_events(buf: bytes) -> list[RawEvent]:
    """The events in ``buf``, the bytes of one ``read(2)`` of an inotify descriptor.

    The kernel pads ``name`` with NUL bytes to an aligned length (``len`` counts them).
    """
    out = []
    i, end, size = 0, len(buf), _HEADER.size
    while i + size <= end:
        wd, mask, cookie, n = _HEADER.unpack_from(buf, i)
        name = buf[i + size : i + size + n].split(b"\0", 1)[0]
        out.append(RawEvent(wd, mask, cookie, name))
        i += size + n
    return out


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The C library with ``errno`` kept by ``ctypes``, or ``None`` when it cannot be loaded."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    if not hasattr(lib, "inotify_init1"):
        return lib
    lib.inotify_init1.argtypes = [ctypes.c_int]
    lib.inotify_init1.restype = ctypes.c_int
    lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    lib.inotify_add_watch.restype = ctypes.c_int
    lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.inotify_rm_watch.restype = ctypes.c_int
    return lib


def _oserror(what: str, path: str | None = None) -> OSError:
    err = ctypes.get_errno() or errno.EINVAL
    return OSError(err, f"{what}: {os.strerror(err)}", path)


class Inotify:
    """One inotify instance: ``inotify_init1(IN_NONBLOCK | IN_CLOEXEC)``.

    Raises:
        OSError: no inotify here (``ENOSYS``), or the per-user instance limit
            ``fs.inotify.max_user_instances`` is reached (``EMFILE``).
    """

    def __init__(self) -> None:
        lib = libc()
        if lib is None or not hasattr(lib, "inotify_init1"):
            raise OSError(errno.ENOSYS, "inotify is not available on this system")
        self._lib = lib
        fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise _oserror("inotify_init1")
        self.fd: int = fd

    def fileno(self) -> int:
        """The descriptor (for ``select``)."""
        return self.fd

    def add_watch(self, path: str, mask: int) -> int:
        """Watch ``path`` for the events of ``mask``; returns the watch descriptor.

        Watching an inode this instance already watches returns its descriptor again
        and replaces its mask.

        Raises:
            OSError: ``ENOENT``/``ENOTDIR`` (gone, or not a folder with
                ``IN_ONLYDIR``), ``EACCES``, ``ENOSPC`` (``fs.inotify.max_user_watches``).
        """
        wd = self._lib.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            raise _oserror("inotify_add_watch", path)
        return int(wd)

    def rm_watch(self, wd: int) -> None:
        """Remove watch ``wd`` (an ``IN_IGNORED`` event follows); a gone watch is no error."""
        self._lib.inotify_rm_watch(self.fd, wd)

    def read(self) -> list[RawEvent]:
        """The events queued now (an empty list when none: the descriptor never blocks)."""
        try:
            buf = os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return []
        return parse_events(buf)

    def close(self) -> None:
        """Close the descriptor (the kernel drops its watches); a second call does nothing."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def available() -> bool:
    """Whether an inotify instance can be made here (Linux with a C library that has it)."""
    try:
        Inotify().close()
    except OSError as exc:
        return exc.errno != errno.ENOSYS
    return True


def fdinfo_inodes(fd: int) -> set[int] | None:
    """Inode numbers the inotify descriptor ``fd`` of this process watches.

    Returns:
        The inodes, or ``None`` when ``/proc`` cannot tell.
    """
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    out: set[int] = set()
    for line in lines:
        if line.startswith(b"inotify "):
            for field in line.split():
                if field.startswith(b"ino:"):
                    out.add(int(field[4:], 16))
                    break
    return out


def max_user_watches() -> int | None:
    """``fs.inotify.max_user_watches``, or ``None`` when it cannot be read."""
    try:
        return int(_LIMIT_FILE.read_text().strip())
    except (OSError, ValueError):
        return None
