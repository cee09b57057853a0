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
from ingestd.daemon.sources.filter import SourceFilter

__all__ = ["scan", "stat_file", "walk_folders"]


def stat_file(path: Path) -> FileStat | None:
    """``FileStat`` of a regular file (symlinks not followed), or ``None``."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    return FileStat.of(st)


def scan(flt: SourceFilter, under: str = "") -> Scan:
    """Walk the source (or folder ``under`` of it) and stat every document.

    Errors opening a folder or reading its entries (``PermissionError`` in ``/proc``,
    ``EIO`` on a failing disk) never end the walk: the folder is listed in
    :attr:`Scan.unreadable`. Names that are not valid UTF-8 are listed in
    :attr:`Scan.skipped` (see :func:`name_problem`); a folder so named is not entered.

    Returns:
        POSIX relative path -> :class:`FileStat`, with what was skipped.
    """
    out = Scan()
    root = flt.root
    stack = [under.strip("/")]
    while stack:
        rel_dir = stack.pop()
        if flt.ignores_dir(rel_dir):
            continue
        try:
            it = os.scandir(root / rel_dir if rel_dir else root)
        except OSError as exc:
            out.unreadable[rel_dir] = exc.strerror or type(exc).__name__
            continue
        with it:
            while True:
                try:
                    entry = next(it)
                except StopIteration:
                    break
                except OSError as exc:  # reading the entries failed mid-way
                    out.unreadable[rel_dir] = exc.strerror or type(exc).__name__
                    break
                _visit(flt, out, stack, entry, f"{rel_dir}/{entry.name}" if rel_dir else entry.name)
    return out


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

    Folders the filter ignores and names that are not UTF-8 are left out, as
    :func:`scan` leaves them; a folder that cannot be read is yielded, not entered.
    """
    if name_problem(under) is not None:
        return  # a folder named so is never entered, nor anything below it
    stack = [under.strip("/")]
    while stack:
        rel_dir = stack.pop()
        if flt.ignores_dir(rel_dir):
            continue
        path = flt.root / rel_dir if rel_dir else flt.root
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat_mod.S_ISDIR(st.st_mode):
            continue
        yield rel_dir, st.st_ino
        try:
            with os.scandir(path) as it:
                subs = [
                    f"{rel_dir}/{e.name}" if rel_dir else e.name
                    for e in it
                    if e.is_dir(follow_symlinks=False) and name_problem(e.name) is None
                ]
        except OSError:
            continue
        stack.extend(subs)
