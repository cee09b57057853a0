r"""Walking a local folder source: the documents it holds, with their stat.

Symlink policy: symlinks are never followed, neither to files nor to folders, so
nothing outside the root is read and a symlink loop cannot hang a walk. A symlinked
document is simply not indexed.

Names that cannot be stored: a path is a key of the manifest, a part of every point
id and a payload value, all of them UTF-8 text. A file or folder name that is not
valid UTF-8 (Python hands it over with surrogate escapes, ``bad\udcff.md``) is
*skipped*: :func:`scan` leaves it out and lists it in :attr:`Scan.skipped` under its
:func:`display_path` (``bad\xff.md``), with the reason. A folder whose entries cannot
be read is skipped the same way (:attr:`Scan.unreadable`): nothing under it is
indexed, and nothing the manifest knows under it is deleted.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Iterator
from pathlib import Path

from ingestd.daemon.sources.base import FileStat, Scan, display_path, name_problem
from ingestd.daemon.sources.beneath import OutsideRootError, folder_fd, stat_beneath
from ingestd.daemon.sources.filter import SourceFilter

__all__ = ["scan", "stat_file", "walk_folders"]


def stat_file(path: Path) -> FileStat | None:
    """``FileStat`` of a regular file (the last part not followed if a link), or ``None``.

    Folders on the way are followed: for a path below a source's root, use
    :meth:`~ingestd.daemon.sources.local.LocalFolder.stat`, which follows no link.
    """
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    return FileStat.of(st)


def scan(flt: SourceFilter, under: str = "") -> Scan:
    """Walk the source (or folder ``under`` of it) and stat every document.

    Each folder is opened beneath the root without following a symbolic link
    (:func:`~ingestd.daemon.sources.beneath.folder_fd`): a folder that is a link, or
    lies under one, holds no document. Errors opening a folder or reading its entries
    (``PermissionError`` in ``/proc``, ``EIO`` on a failing disk) never end the walk:
    the folder is listed in :attr:`Scan.unreadable`. Names that are not valid UTF-8 are
    listed in :attr:`Scan.skipped` (see :func:`name_problem`); a folder so named is
    not entered.

    Returns:
        POSIX relative path -> :class:`FileStat`, with what was skipped.
    """
    out = Scan()
    stack = [under.strip("/")]
    while stack:
        rel_dir = stack.pop()
        if flt.ignores_dir(rel_dir):
            continue
        try:
            with folder_fd(flt.root, rel_dir) as fd, os.scandir(fd) as it:
                _entries(flt, out, stack, it, rel_dir)
        except OutsideRootError:
            continue  # a link where a folder was: nothing beneath the root is there
        except OSError as exc:
            out.unreadable[rel_dir] = exc.strerror or type(exc).__name__
    return out


def _entries(
    flt: SourceFilter, out: Scan, stack: list[str], it: Iterator[os.DirEntry[str]], rel_dir: str
) -> None:
    while True:
        try:
            entry = next(it)
        except StopIteration:
            return
        except OSError as exc:  # reading the entries failed mid-way
            out.unreadable[rel_dir] = exc.strerror or type(exc).__name__
            return
        _visit(flt, out, stack, entry, f"{rel_dir}/{entry.name}" if rel_dir else entry.name)


def _visit(
    flt: SourceFilter, out: Scan, stack: list[str], entry: os.DirEntry[str], rel: str
) -> None:
    try:
        if entry.is_dir(follow_symlinks=False):
            problem = name_problem(entry.name)
            if problem is None:
                stack.append(rel)
            elif not flt.ignores_dir(rel):
                out.skipped[display_path(rel) + "/"] = f"folder {problem}: nothing in it is indexed"
        elif entry.is_file(follow_symlinks=False) and flt.accepts(rel):
            problem = name_problem(rel)
            if problem is None:
                out[rel] = FileStat.of(entry.stat(follow_symlinks=False))
            else:
                out.skipped[display_path(rel)] = f"file {problem}; skipped"
    except OSError:
        pass  # vanished or unreadable entry: not a document now


def walk_folders(flt: SourceFilter, under: str = "") -> Iterator[tuple[str, int]]:
    """``(relative path, inode)`` of folder ``under`` and every folder below it.

    Folders the filter ignores, links and names that are not UTF-8 are left out, as
    :func:`scan` leaves them; a folder that cannot be read is yielded, not entered.
    """
    if name_problem(under) is not None:
        return  # a folder named so is never entered, nor anything below it
    stack = [under.strip("/")]
    while stack:
        rel_dir = stack.pop()
        if flt.ignores_dir(rel_dir):
            continue
        st = stat_beneath(flt.root, rel_dir) if rel_dir else _lstat(flt.root)
        if st is None or not stat_mod.S_ISDIR(st.st_mode):
            continue
        yield rel_dir, st.st_ino
        try:
            with folder_fd(flt.root, rel_dir) as fd, os.scandir(fd) as it:
                subs = [
                    f"{rel_dir}/{e.name}" if rel_dir else e.name
                    for e in it
                    if e.is_dir(follow_symlinks=False) and name_problem(e.name) is None
                ]
        except OSError:
            continue
        stack.extend(subs)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None
