r"""Which files of a source are documents, and a fast walk that stats them.

Filtering (shared by scans and the watcher, so ignored paths never reach the planner):

* always ignored: VCS folders (``.git``, ``.hg``, ``.svn``), ``__pycache__``,
  ``node_modules``, virtualenvs, the state dir when it lies inside the root, and
  editor temporaries (vim's ``4913`` probe, swap files, ``name~`` backups, emacs
  ``.#name`` locks and ``#name#`` autosaves);
* then ``include`` globs, then ``exclude`` globs, then ``.gitignore`` files (root and
  nested, via pathspec's gitignore semantics) when the source honours them.

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
import re
import stat as stat_mod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from ingestd.daemon.config import SourceConfig

__all__ = [
    "FileStat",
    "Scan",
    "SourceFilter",
    "display_path",
    "git_head",
    "name_problem",
    "scan",
    "stat_file",
    "walk_folders",
]

_IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        "node_modules",
        ".venv",
        "venv",
        ".tox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".idea",
        ".vscode",
    }
)
_TEMP_FILE = re.compile(
    r"""^(
        4913 | \.\#.* | \#.*\# | .*~ | \..*\.sw[a-p] | .*\.sw[a-p]x? | .*\.tmp | .*\.bak
        | \.~lock\..*\# | .*\.kate-swp | \.goutputstream-.* | .*\.crdownload | .*\.part
    )$""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class FileStat:
    """The stat fast-path key of a file: size (bytes), mtime and ctime (ns), inode.

    ``nlink``, the file's number of hard links, is carried along but not part of the
    key (the manifest does not record it; see :mod:`~ingestd.daemon.sync.links`).
    """

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    nlink: int = field(default=1, compare=False)

    @classmethod
    def of(cls, st: os.stat_result) -> FileStat:
        """From an ``os.stat_result``."""
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_nlink)


class SourceFilter:
    """Decides whether a path of one source is a document.

    Args:
        source: the source.
        state_dir: ingestd's state dir, ignored when it lies inside the root.

    Paths given to the methods are POSIX and relative to the source root. The engine's
    thread and the source's watcher thread share a filter: the watcher forgets cached
    ``.gitignore`` rules when one changes, while a scan may be reading them.
    """

    __slots__ = ("_exclude", "_gitignores", "_include", "_state_rel", "root", "source")

    def __init__(self, source: SourceConfig, state_dir: Path | None = None) -> None:
        self.source = source
        self.root = Path(source.root)
        self._include = pathspec.GitIgnoreSpec.from_lines(source.include)
        self._exclude = pathspec.GitIgnoreSpec.from_lines(source.exclude)
        self._gitignores: dict[str, pathspec.GitIgnoreSpec | None] = {}
        self._state_rel: str | None = None
        if state_dir is not None:
            try:
                rel = Path(os.path.realpath(state_dir)).relative_to(self.root)
                self._state_rel = rel.as_posix() if rel.parts else None
            except ValueError:
                pass

    def __repr__(self) -> str:
        return f"SourceFilter(source={self.source.name!r}, root={str(self.root)!r})"

    def ignores_dir(self, rel: str) -> bool:
        """Whether folder ``rel`` (and all below it) is ignored."""
        if not rel or rel == ".":
            return False
        parts = rel.split("/")
        if any(p in _IGNORED_DIRS for p in parts):
            return True
        if self._state_rel and (rel == self._state_rel or rel.startswith(self._state_rel + "/")):
            return True
        if self._exclude.match_file(rel + "/"):
            return True
        return self.source.gitignore and self._gitignored(rel, is_dir=True)

    def accepts(self, rel: str) -> bool:
        """Whether file ``rel`` is a document of this source."""
        if not rel or rel.startswith("../"):
            return False
        parts = rel.split("/")
        if _TEMP_FILE.match(parts[-1]):
            return False
        if len(parts) > 1 and self.ignores_dir("/".join(parts[:-1])):
            return False
        if not self._include.match_file(rel) or self._exclude.match_file(rel):
            return False
        return not (self.source.gitignore and self._gitignored(rel, is_dir=False))

    def _spec_for(self, folder: str) -> pathspec.GitIgnoreSpec | None:
        # the watcher's thread may forget the cache at any moment (a .gitignore
        # changed): never read back what was just stored
        try:
            return self._gitignores[folder]
        except KeyError:
            pass
        f = self.root / folder / ".gitignore" if folder else self.root / ".gitignore"
        try:
            lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        self._gitignores[folder] = spec
        return spec

    def _gitignored(self, rel: str, *, is_dir: bool) -> bool:
        parts = rel.split("/")
        ignored = False
        for i in range(len(parts)):
            folder = "/".join(parts[:i])
            spec = self._spec_for(folder)
            if spec is None:
                continue
            sub = "/".join(parts[i:]) + ("/" if is_dir else "")
            res = spec.check_file(sub)
            if res.include is not None:
                ignored = bool(res.include)
        return ignored

    def forget_gitignore(self, rel_folder: str) -> None:
        """Drop the cached ``.gitignore`` of a folder (after it changed)."""
        self._gitignores.pop(rel_folder, None)
        if rel_folder == "":
            self._gitignores.clear()


def stat_file(path: Path) -> FileStat | None:
    """``FileStat`` of a regular file (symlinks not followed), or ``None``."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    return FileStat.of(st)


def name_problem(rel: str) -> str | None:
    """Why path ``rel`` cannot be indexed as named, or ``None`` when it can.

    Every path is stored as UTF-8 text (manifest key, point id, payload), so a name
    that is not valid UTF-8 (surrogate-escaped by Python) is refused.
    """
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return "name is not valid UTF-8"
    return None


def display_path(rel: str) -> str:
    r"""``rel`` as printable text: bytes that are not UTF-8 shown as ``\xff`` escapes."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


class Scan(dict[str, FileStat]):
    """What :func:`scan` found: POSIX relative path -> :class:`FileStat` of each document.

    Attributes:
        skipped: entries left out, by :func:`display_path`: names that are not valid
            UTF-8 (files the source would index, and folders) -> the reason.
        unreadable: folders (relative paths, ``""`` for the root) whose entries could
            not be read -> the error. Documents the manifest knows below them are
            neither indexed nor deleted.
    """

    def __init__(self) -> None:
        super().__init__()
        self.skipped: dict[str, str] = {}
        self.unreadable: dict[str, str] = {}

    def covers(self, rel: str) -> bool:
        """Whether ``rel`` lies in an unreadable folder (so its absence means nothing)."""
        return any(
            not folder or rel == folder or rel.startswith(folder + "/")
            for folder in self.unreadable
        )


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


def git_head(root: Path) -> str | None:
    """HEAD's commit id of the git checkout at ``root``, read from ``.git``; else ``None``.

    Handles a detached HEAD, loose refs, ``packed-refs`` and a ``.git`` file pointing
    at the real git dir (worktrees, submodules).
    """
    git = root / ".git"
    try:
        if git.is_file():
            line = git.read_text().strip()
            if line.startswith("gitdir:"):
                git = (root / line.split(":", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head or None
    ref = head.split(":", 1)[1].strip()
    common = git
    try:
        c = (git / "commondir").read_text().strip()
        common = (git / c).resolve()
    except OSError:
        pass
    for base in (git, common):
        try:
            return (base / ref).read_text().strip()
        except OSError:
            continue
    try:
        for line in (common / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split(" ", 1)[0]
    except OSError:
        pass
    return None
