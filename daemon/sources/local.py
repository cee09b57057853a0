"""The local folder source: a docs folder or a git checkout's working tree.

Its documents are the regular files under its root that its filter accepts
(:class:`~ingestd.daemon.sources.filter.SourceFilter`), listed by a walk that never
follows a symlink (:mod:`~ingestd.daemon.sources.walk`), identified by their stat
(size, mtime, ctime, inode); its changes are watched (inotify, or watchdog's
observers where there is none). A git checkout records HEAD's commit in every
payload (``git_commit``). Its configuration is :class:`LocalSourceConfig`.
"""

from __future__ import annotations

import stat as stat_mod
from pathlib import Path
from typing import ClassVar, Literal

from ingestd.daemon.config.models import SourceConfig
from ingestd.daemon.sources.base import ChangeMode, FileStat, Scan
from ingestd.daemon.sources.beneath import read_beneath, stat_beneath
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.sources.walk import scan

__all__ = ["LocalFolder", "LocalSourceConfig", "git_head"]


class LocalSourceConfig(SourceConfig):
    """A ``kind: local`` source (the default): a folder, or a git checkout's working tree.

    Attributes:
        git: the tree is a git checkout (HEAD's commit goes into ``git_commit``);
            ``None``: detect a ``.git`` folder at the root.

    The keys every kind has (``root``, required here; ``include``, ``exclude``, ...)
    are :class:`~ingestd.daemon.config.models.SourceConfig`'s.
    """

    kind: Literal["local"] = "local"
    git: bool | None = None


class LocalFolder:
    """The documents of a folder on the local file system (a ``Source``).

    Args:
        config: the source's configuration (``root``, globs, ``.gitignore``, ``git``).
        state_dir: ingestd's state dir, left out when it lies inside the root.

    Attributes:
        filter: which paths are documents (shared with the source's watcher).
    """

    kind: ClassVar[str] = "local"
    changes: ChangeMode = "watched"
    poll_s: float = 0.0  # watched: the periodic safety rescan is ``watch.rescan_interval_s``

    def __init__(self, config: LocalSourceConfig, state_dir: Path | None = None) -> None:
        self.name = config.name
        self.config = config
        self.root = Path(config.root)
        self.filter = SourceFilter(config, state_dir)

    def __repr__(self) -> str:
        return f"LocalFolder(name={self.name!r}, root={str(self.root)!r})"

    def missing(self) -> str | None:
        """Why the root cannot be listed (it is not a folder now), else ``None``."""
        if self.root.is_dir():
            return None
        return f"ROOT MISSING: {self.root} is not a folder (unmounted, moved or deleted?)"

    def scan(self, under: str = "") -> Scan:
        """Every document under the root, or folder ``under`` (:func:`~.walk.scan`)."""
        return scan(self.filter, under)

    def is_folder(self, rel: str) -> bool:
        """Whether ``rel`` is a folder beneath the root, reached through no symbolic link."""
        st = stat_beneath(self.root, rel)
        return st is not None and stat_mod.S_ISDIR(st.st_mode)

    def stat(self, rel: str) -> FileStat | None:
        """The stat of ``rel`` when it is a regular file beneath the root, else ``None``.

        No symbolic link is followed on the way (:mod:`~ingestd.daemon.sources.beneath`):
        a file or a folder replaced by a link is not there.
        """
        st = stat_beneath(self.root, rel)
        return FileStat.of(st) if st is not None and stat_mod.S_ISREG(st.st_mode) else None

    def accepts(self, rel: str) -> bool:
        """Whether file ``rel`` is a document of this source by its name (the filter)."""
        return self.filter.accepts(rel)

    def ignores_folder(self, rel: str) -> bool:
        """Whether folder ``rel`` and all below it are left out."""
        return self.filter.ignores_dir(rel)

    def read(self, rel: str) -> bytes:
        """The bytes of ``rel``, opened beneath the root without following a link.

        Raises:
            ingestd.daemon.sources.beneath.OutsideRootError: a symbolic link is on the
                way (a ``FileNotFoundError``: nothing beneath the root is there).
            FileNotFoundError: it is gone, or not a regular file.
            OSError: it cannot be opened or read.
        """
        return read_beneath(self.root, rel)

    def revision(self) -> str | None:
        """HEAD's commit when the source is a git checkout (``git`` or detected), else ``None``."""
        is_git = self.config.git if self.config.git is not None else (self.root / ".git").exists()
        return git_head(self.root) if is_git else None


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
