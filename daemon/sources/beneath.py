"""Opening a path beneath a root folder, never following a symbolic link.

A document of a local folder source is named by a path relative to the root. Reading
``root / path`` with ``open()`` follows every symbolic link on the way: a file or a
folder of the tree replaced by a link (``docs/guide -> /etc``) would hand the daemon,
and through ``read`` an agent, a file outside every root. Here each folder on the way
is opened relative to the one before it (``openat(2)`` with ``O_NOFOLLOW``) and the
file itself likewise, so a link anywhere on the path is refused, and a link swapped in
while the path is walked cannot lead out: each step holds the descriptor of the real
folder it reached (the technique of ``openat2(2)``'s ``RESOLVE_NO_SYMLINKS``, built
from the POSIX calls Python has). A path with ``..``, an empty or absolute part is
refused before anything is opened.

Hard links are names inside the root like any other: content reached through one is
the file's content, as every tool that reads the tree sees it.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["OutsideRootError", "folder_fd", "open_beneath", "read_beneath", "stat_beneath"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: Largest read of a document in one call, in bytes.
_CHUNK = 1 << 20


class OutsideRootError(FileNotFoundError):
    """The path leaves the root: a symbolic link on the way, or ``..``.

    A subclass of :class:`FileNotFoundError`: to the planner such a path holds no
    document (a file or folder that became a link out of the root is a deletion).
    """

    def __init__(self, rel: str, why: str) -> None:
        super().__init__(errno.ENOENT, f"{rel}: {why}; not read")
        self.rel = rel


def _parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise OutsideRootError(rel, "not a plain path relative to the root")
    return parts


def _step(name: str, flags: int, dir_fd: int, rel: str) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and flags & os.O_DIRECTORY):
            # ELOOP: the name is a symbolic link (O_NOFOLLOW); ENOTDIR on a folder step:
            # a link to something that is not a folder, or a file where a folder was
            if _is_link(name, dir_fd):
                raise OutsideRootError(rel, f"{name!r} is a symbolic link") from None
        raise


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat_mod.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextmanager
def folder_fd(root: Path, rel: str = "") -> Iterator[int]:
    """A descriptor of folder ``rel`` beneath ``root`` (``""``: the root), closed on exit.

    Raises:
        OutsideRootError: a part of ``rel`` is a symbolic link, or ``rel`` is not plain.
        OSError: a part is missing (``FileNotFoundError``), not a folder, or unreadable.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if rel:
            for part in _parts(rel):
                nxt = _step(part, _DIR_FLAGS, fd, rel)
                os.close(fd)
                fd = nxt
        yield fd
    finally:
        os.close(fd)


def open_beneath(root: Path, rel: str) -> int:
    """Open regular file ``rel`` beneath ``root`` for reading; the caller closes the descriptor.

    Args:
        root: the source's root folder (canonical: the config resolves it).
        rel: POSIX path relative to ``root``.

    Raises:
        OutsideRootError: a part of ``rel`` is a symbolic link, or ``rel`` is not plain.
        FileNotFoundError: it is gone, or is not a regular file (a folder, a FIFO).
        OSError: it cannot be opened.
    """
    parts = _parts(rel)
    folder = "/".join(parts[:-1])
    with folder_fd(root, folder) as dir_fd:
        fd = _step(parts[-1], _FILE_FLAGS, dir_fd, rel)
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            raise FileNotFoundError(errno.ENOENT, f"{rel}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_beneath(root: Path, rel: str) -> bytes:
    """The bytes of regular file ``rel`` beneath ``root`` (see :func:`open_beneath`).

    Raises:
        OutsideRootError: a part of ``rel`` is a symbolic link, or ``rel`` is not plain.
        FileNotFoundError: it is gone, or is not a regular file.
        OSError: it cannot be opened or read.
    """
    fd = open_beneath(root, rel)
    try:
        os.set_blocking(fd, True)
        parts = []
        while True:
            part = os.read(fd, _CHUNK)
            if not part:
                break
            parts.append(part)
        return b"".join(parts)
    finally:
        os.close(fd)


def stat_beneath(root: Path, rel: str) -> os.stat_result | None:
    """The ``lstat`` of ``rel`` beneath ``root``, no link followed on the way; ``None`` if none.

    ``None`` also when a folder on the way is a symbolic link or ``rel`` is not plain:
    nothing beneath the root is there.
    """
    try:
        parts = _parts(rel)
        with folder_fd(root, "/".join(parts[:-1])) as dir_fd:
            return os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
