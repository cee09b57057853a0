"""What a source is to the sync engine: the documents it holds and how its changes arrive.

A *source* (DESIGN.md point 1) is one unit behind :class:`Source`: it lists its
documents with an identity each (:class:`FileStat`: size, times and inode of a file;
a git blob id would serve the same purpose), reads a document's bytes, and says how
its changes arrive (:data:`ChangeMode`: *watched* by the kernel, or *polled*). The
planner, the preparer, ``verify`` and ``read`` speak only to this interface; the
watcher is given the sources whose changes are watched.

Kinds of source are listed in one table, :data:`ingestd.daemon.sources.kinds.SOURCE_KINDS`.
A kind's optional powers are Protocols a reader class declares by naming them among its
bases: :class:`Fetched` (its documents are fetched from an origin: a git server, a
site) and
:class:`Versioned` (it holds several versions of each file). The table checks each
declaration once, when the kind is loaded; the rest of ingestd asks
``isinstance(source, Versioned)``.
Paths are POSIX, relative to the source, and valid UTF-8 (the manifest, the point
ids and the payload store them as text).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeGuard, runtime_checkable

if TYPE_CHECKING:
    from ingestd.daemon.config import SourceConfig
    from ingestd.daemon.sources.filter import SourceFilter

__all__ = [
    "DRY_RUN_FIRST_FETCH",
    "POWERS",
    "ChangeMode",
    "Fetched",
    "FileStat",
    "Scan",
    "Source",
    "Versioned",
    "WatchedSource",
    "display_path",
    "is_watched",
    "name_problem",
    "open_source",
    "reader_class",
]

#: How a source's changes reach the daemon: ``watched`` (the kernel reports them, a
#: periodic rescan catches what it missed) or ``polled`` (the source is asked at an
#: interval, or when ``ingestd sync`` names it).
ChangeMode = Literal["watched", "polled"]


@dataclass(frozen=True, slots=True)
class FileStat:
    """The stat fast-path key of a file: size (bytes), mtime and ctime (ns), inode.

    ``nlink``, the file's number of hard links, is carried along but not part of the
    key (the manifest does not record it; see :mod:`~ingestd.daemon.sync.planning.links`).
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


class Source(Protocol):
    """The documents of one source (see the module docstring).

    Attributes:
        name: the source's identity (payload ``source``, part of every point id).
        config: its configuration.
        changes: how its changes arrive.
        root: the folder its paths are relative to, for a source on the local file
            system (shown by ``status``, recorded in the manifest); otherwise a
            location that names it.
        poll_s: seconds between two polls of a ``polled`` source (it is scanned
            that often; ``ingestd sync`` polls it at once).

    A source is used by one thread at a time (the engine's), except :meth:`accepts`
    and :meth:`ignores_folder`, which the watcher thread calls too.
    """

    name: str
    config: SourceConfig
    changes: ChangeMode
    root: Path
    poll_s: float

    def missing(self) -> str | None:
        """Why the source cannot be listed now (a root that is gone), else ``None``.

        A missing source is not a deletion of its documents: nothing is synced or
        deleted until it is back.
        """
        ...

    def scan(self, under: str = "") -> Scan:
        """Every document of the source, or of folder ``under`` of it, with its stat."""
        ...

    def is_folder(self, rel: str) -> bool:
        """Whether ``rel`` is a folder of the source (a symlink never is)."""
        ...

    def stat(self, rel: str) -> FileStat | None:
        """The stat of document path ``rel`` when it is a regular file, else ``None``."""
        ...

    def accepts(self, rel: str) -> bool:
        """Whether file ``rel`` would be a document of this source (its filters)."""
        ...

    def ignores_folder(self, rel: str) -> bool:
        """Whether folder ``rel`` and everything below it is left out."""
        ...

    def read(self, rel: str) -> bytes:
        """The bytes of document ``rel``.

        Raises:
            FileNotFoundError: it is gone.
            OSError: it cannot be opened or read.
        """
        ...

    def revision(self) -> str | None:
        """The commit the documents are read at (payload ``git_commit``), if any."""
        ...


class WatchedSource(Source, Protocol):
    """A source whose changes are ``watched``: the watcher applies its filter.

    Attributes:
        filter: which paths under :attr:`root` are documents (the watcher's thread
            reads it too).
    """

    filter: SourceFilter


#: The end of a dry run's note on a source that answers but was never fetched.
DRY_RUN_FIRST_FETCH = (
    "A dry run fetches nothing: the first fetch (ingestd sync, or the daemon) indexes them"
)


@runtime_checkable
class Fetched(Protocol):
    """The power of a source fetched from an origin (a git server, a site) before it is listed.

    The daemon fetches it in a thread of its own at its ``poll_s`` interval, and
    ``ingestd sync`` first; ``status`` reports its fetches.
    """

    def refresh(self) -> bool:
        """Fetch from the origin; whether anything moved, came or went.

        Raises:
            ingestd.daemon.errors.IngestdError: the fetch failed (nothing is deleted).
        """
        ...

    def fetch_state(self) -> dict[str, Any]:
        """The last fetches: ``fetched_at``, ``failing_since`` (epoch seconds), ``error``."""
        ...

    def first_fetch_pending(self) -> bool:
        """Whether nothing was fetched yet and no fetch has failed (a source on its way)."""
        ...

    def origin(self) -> str:
        """Where the documents come from, as messages name it: its URL without user info.

        Messages never name the folder the fetches are kept in (the state dir's business).
        """
        ...

    def empty_note(self) -> str:
        """Why the last good fetch left no document, in the kind's own terms (one line).

        Said when a scan finds nothing (instead of a folder's advice on include globs):
        a site whose pages ``robots.txt`` disallows, a ref with no file the globs match.
        """
        ...

    def dry_run(self) -> dict[str, Any]:
        """What ``resync --dry-run`` says of the origin when no good fetch can be planned from.

        It keeps nothing (a look at the origin: ``git ls-remote``, a sitemap).

        Returns:
            ``dry_run_note`` (why the origin cannot be read, or what it holds);
            ``remote_ok`` when it answers with something to index, with the kind's own
            keys of what it holds.
        """
        ...


@runtime_checkable
class Versioned(Protocol):
    """The power of a source holding versions of its files (a git source's refs).

    Its document keys are ``<version>:<path>``
    (:func:`~ingestd.daemon.sources.versions.split_document`).
    """

    def versions(self) -> Mapping[str, Any]:
        """The versions it holds now, by name."""
        ...

    def commit_of(self, version: str) -> str | None:
        """The commit ``version`` is at, or ``None`` when it is not held."""
        ...

    def commits_off(self, version: str, commits: Iterable[str]) -> set[str]:
        """Those of ``commits`` no longer on the history of ``version``."""
        ...


#: The optional powers a kind's reader class may declare (among its bases).
POWERS: tuple[type, ...] = (Fetched, Versioned)


def is_watched(source: Source) -> TypeGuard[WatchedSource]:
    """Whether ``source``'s changes are watched (it has a filter for the watcher)."""
    return source.changes == "watched" and hasattr(source, "filter")


#: Reader classes whose powers were checked: ``"module:Class"`` -> the class.
_CHECKED: dict[str, type] = {}


def reader_class(kind: str) -> type:
    """The class that reads sources of ``kind``, its declared powers checked once.

    A power (:data:`POWERS`) is declared by naming its Protocol among the class's
    bases. A class defining every method of a power it does not declare, or lacking one
    of a power it declares, is refused.

    Raises:
        ingestd.daemon.sources.kinds.UnknownSourceKindError: ``kind`` is not in the table.
        TypeError: the class's powers do not match its declaration.
    """
    from ingestd.daemon.sources.kinds import load, reader_target

    target = reader_target(kind)
    cls = _CHECKED.get(target)
    if cls is None:
        cls = load(target)
        _check_powers(kind, cls)
        _CHECKED[target] = cls
    return cls


def _check_powers(kind: str, cls: type) -> None:
    for power in POWERS:
        members = sorted(n for n, v in vars(power).items() if callable(v) and n[0] != "_")
        # a method counts where the class (or a base other than the power) defines it
        present = [n for n in members if any(n in vars(k) for k in cls.__mro__ if k is not power)]
        declared = power in cls.__mro__
        if declared and present != members:
            lacking = ", ".join(sorted(set(members) - set(present)))
            raise TypeError(
                f"source kind {kind!r}: {cls.__name__} declares {power.__name__} "
                f"but lacks {lacking}"
            )
        if not declared and present == members:
            raise TypeError(
                f"source kind {kind!r}: {cls.__name__} has every method of {power.__name__} "
                f"({', '.join(members)}): declare it among its bases"
            )


def open_source(config: SourceConfig, state_dir: Path | None = None) -> Source:
    """The :class:`Source` of ``config``, of the class its ``kind`` names.

    Args:
        config: the source's configuration.
        state_dir: ingestd's state dir (a local folder leaves it out of its documents).

    Raises:
        ingestd.daemon.sources.kinds.UnknownSourceKindError: unknown kind.
        TypeError: the kind's reader declares powers it lacks, or lacks a declaration.
    """
    source: Source = reader_class(config.kind)(config, state_dir)
    return source
