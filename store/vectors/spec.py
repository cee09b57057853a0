"""What an embedded engine is, apart from what it does with points: :class:`EngineSpec`.

:class:`~ingestd.store.vectors.base.VectorStore` is what an engine does with points.
An :class:`EngineSpec` is everything else about it, readable without importing the
engine itself: its folder in the state dir and the config key that moves it, how to
tell that a folder holds its store, whether its library is installed, how it opens,
how its files are checked for damage (from the files alone, for ``ingestd status``, and
by opening them, for ``ingestd resync --rebuild``), what it costs on disk and in memory,
where its collections live, what in its files proves that a collection is as a clean
close left it (:meth:`EngineSpec.proof`), and how it translates the neutral filter
conditions (:mod:`ingestd.store.search.conditions`).

The table of engines (name -> spec) is :data:`ingestd.store.vectors.engines.ENGINES`.
A spec module imports nothing heavy at module level (``ingestd status`` reads specs);
its engine's store class is imported when :meth:`EngineSpec.open` is called.
"""

from __future__ import annotations

import importlib.util
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ingestd.store.common.damage import StateDamagedError
from ingestd.store.vectors.base import version_of

if TYPE_CHECKING:
    from ingestd.store.search.conditions import Conditions
    from ingestd.store.vectors.base import VectorStore

__all__ = ["STORE_PART", "EngineSpec", "StoreSettings", "allocated_bytes", "json_damage"]

#: The part of the state an engine's damage names (:class:`StateDamagedError`).
STORE_PART = "vector store"


class StoreSettings(Protocol):
    """What the configuration says of the vector store (the config's ``qdrant`` section)."""

    @property
    def engine(self) -> str | None:
        """The embedded engine configured (``None``: chosen from the state dir's files)."""

    @property
    def url(self) -> str | None:
        """A Qdrant server's URL (``None``: an embedded engine)."""

    @property
    def api_key_env(self) -> str:
        """The environment variable holding the server's API key."""

    @property
    def retry_seconds(self) -> float:
        """How long transient server errors are retried, in seconds."""


def allocated_bytes(path: Path) -> int:
    """Bytes the file system allocated to ``path`` (a file, or every file below a folder).

    Counts allocated blocks (``st_blocks * 512``), not the apparent size: an engine's
    sparse files (Qdrant Edge maps large, mostly empty files) take far less disk than
    their size says (205 MB apparent, 4.5 MB allocated for one small store). Links are
    not followed; a file that vanishes or cannot be read counts 0; a missing path 0.

    Args:
        path: the file or folder.

    Returns:
        The allocated size in bytes.
    """
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    if not os.path.isdir(path) or os.path.islink(path):
        return st.st_blocks * 512
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def json_damage(file: Path) -> StateDamagedError | None:
    """Damage of a JSON file that must parse, or ``None`` (a missing or unreadable one is none).

    Args:
        file: the file (an unreadable one is an error of its own when the store opens).
    """
    try:
        json.loads(file.read_bytes())
    except OSError:
        return None
    except ValueError as exc:
        return StateDamagedError(file, STORE_PART, f"{type(exc).__name__}: {exc}")
    return None


class EngineSpec(ABC):
    """Everything about one engine, read without importing the engine.

    A subclass per engine, instantiated once in its light module as ``SPEC`` and
    named in :data:`ingestd.store.vectors.engines.ENGINES`.

    Attributes:
        name: the engine's name (``qdrant.engine``, ``Layout.engine``).
        folder: its folder's name in the state dir (the default).
        config_key: the key of the config's ``qdrant`` section that moves the folder
            elsewhere (``path``, ``edge_path``); ``None``: it always lives in the state dir.
        collections_dir: the subfolder of its folder holding one entry per physical
            collection.
        package: the import name of the library it runs on.
        install_hint: how to install that library, or what to do instead (shown when
            the configured engine is not installed).
        durable_updates: every write the engine acknowledged survives a crash (each is
            a database transaction). ``False`` for an engine whose write-ahead log, cut
            by a crash or a disk fault, can lose acknowledged payload updates while the
            points stay: its store is checked point by point
            (:func:`ingestd.daemon.sync.healing.repair.check_store`), not only counted, by the
            first process that uses it after an unclean end, i.e. unless its files
            still match the :meth:`proof` taken at its last clean close.
        embedded: the engine runs in-process on files of the state dir: one state dir
            owns its store (checked before it opens, moved by ``ingestd takeover``),
            its files are read for damage and proven at a clean close, and it is chosen
            from the files (:func:`~ingestd.store.vectors.engines.choose_engine`).
            ``False`` for an engine the settings select outright (:meth:`selected`) and
            :meth:`connect` opens: a server, whose collections other state dirs may
            share.
    """

    name: ClassVar[str]
    folder: ClassVar[str]
    config_key: ClassVar[str | None] = None
    collections_dir: ClassVar[str]
    package: ClassVar[str]
    install_hint: ClassVar[str]
    durable_updates: ClassVar[bool] = False
    embedded: ClassVar[bool] = True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    # -- which engine holds a folder ------------------------------------------------------------

    @abstractmethod
    def holds_store(self, path: Path) -> bool:
        """Whether folder ``path`` holds a store of this engine worth keeping (files only)."""

    @abstractmethod
    def holds_collections(self, path: Path) -> bool:
        """Whether folder ``path`` holds a store of this engine with a collection (files only)."""

    def installed(self) -> bool:
        """Whether the engine's library (:attr:`package`) can be imported here (not imported)."""
        return importlib.util.find_spec(self.package) is not None

    def selected(self, settings: StoreSettings) -> bool:
        """Whether ``settings`` select this engine outright (an engine not :attr:`embedded`).

        ``False`` (the default) for an embedded engine: it is chosen from the state
        dir's files and ``settings.engine``.
        """
        return False

    # -- opening --------------------------------------------------------------------------------

    def connect(self, settings: StoreSettings, *, read_only: bool = False) -> VectorStore:
        """Open the store ``settings`` select (an engine not :attr:`embedded`).

        Raises:
            NotImplementedError: an embedded engine opens a folder (:meth:`open`).
        """
        raise NotImplementedError(f"engine {self.name} opens a folder of the state dir")

    @abstractmethod
    def open(self, path: Path, *, read_only: bool = False) -> VectorStore:
        """Open the store in folder ``path`` (created when missing); imports the engine.

        With ``read_only`` the store is opened by a reader (the state dir's shared lock
        held, no writer running): nothing is created, healed or converted, and its
        write methods raise :class:`~ingestd.store.vectors.base.StoreReadOnlyError`.
        What the engine itself writes when it loads a store is the engine's: see each
        engine's :meth:`open`.

        Raises:
            ingestd.store.vectors.base.StoreUnavailableError: another process holds it, or
                the engine is not installed.
            ingestd.store.common.damage.StateDamagedError: its files are damaged.
        """

    def open_damage(self, path: Path, exc: BaseException) -> StateDamagedError | None:
        """What an error raised by :meth:`open` says of the store's files.

        Args:
            path: the store's folder.
            exc: what opening it raised (other than the errors :meth:`open` documents).

        Returns:
            The damage, naming the damaged file; ``None`` when ``exc`` is no sign of
            damage (a permission error, a full disk): it is raised as it is.
        """
        return None

    # -- damage ---------------------------------------------------------------------------------

    @abstractmethod
    def files_damage(self, path: Path) -> StateDamagedError | None:
        """The first damage found in the store's files by reading them, or ``None``.

        Imports and opens nothing (``ingestd status`` runs it and must stay fast): it
        reads the small files the engine reads first when it opens a store and rejects
        what the engine rejects. Damage deeper in a file is found by :meth:`deep_damage`.
        """

    @abstractmethod
    def deep_damage(self, path: Path) -> StateDamagedError | None:
        """The damage of the store at ``path`` found by opening all of it, or ``None``.

        The first step of ``ingestd resync --rebuild``: a damaged store is moved aside.

        Raises:
            Exception: an error that is no sign of damage (the store is in use, a
                permission error).
        """

    # -- what it costs ----------------------------------------------------------------------------

    def disk_bytes(self, path: Path) -> int:
        """The store's (or one collection's) true size on disk: allocated blocks, in bytes."""
        return allocated_bytes(path)

    def memory_bytes(self, store_bytes: int) -> int:
        """Bytes of memory the engine holds for a store of ``store_bytes`` on disk.

        The default: nothing beyond what it maps from its files.
        """
        return 0

    def collection_folders(self, path: Path, collection: str) -> list[Path]:
        """The entries of ``collection``'s physical collections in the store at ``path``.

        Its versions ``<collection>__v<N>``, and a collection of the name itself
        (written before versions existed), below :attr:`collections_dir`.
        """
        root = path / self.collections_dir
        return sorted(
            p
            for p in root.glob(f"{collection}*")
            if p.name == collection or version_of(p.name, collection) is not None
        )

    def physicals(self, path: Path) -> list[str]:
        """The physical collections of the store at ``path``, read from the files.

        The folders below :attr:`collections_dir` (none when it is missing).
        """
        try:
            return sorted(p.name for p in (path / self.collections_dir).iterdir() if p.is_dir())
        except OSError:
            return []

    def physical_of(self, path: Path, name: str) -> str | None:
        """The physical collection behind collection (or alias) ``name``, from the files.

        Returns:
            Its name; ``None`` when nothing stands behind ``name``, or when the engine
            cannot tell without opening the store (the default).
        """
        return None

    # -- what proves a clean close -----------------------------------------------------------

    def proof(self, path: Path, physical: str) -> dict[str, Any] | None:
        """What the files of ``physical`` say right after a clean close, to compare later.

        A small JSON-ready record, taken after the store was closed and kept in the
        state dir's clean-close record (:mod:`ingestd.daemon.sync.state.clean_close`). While
        the files still match it (:meth:`proof_change`), nothing wrote to the
        collection and nothing of it was lost: its points are counted from the record,
        and an engine without :attr:`durable_updates` needs no point-by-point check.

        Returns:
            The record; ``None`` (the default) when the engine keeps nothing that proves
            it (its collections are then counted by opening the store, and checked point
            by point after every start when its updates are not durable).
        """
        return None

    def proof_change(self, path: Path, physical: str, proof: Mapping[str, Any]) -> str | None:
        """What changed in the files of ``physical`` since :meth:`proof` gave ``proof``.

        Returns:
            ``None`` when they still match; else what differs, in a few words (``its
            write-ahead log ends at 12, not at 245``).
        """
        return "this engine keeps no proof of a clean close"

    def point_count(self, path: Path, collection: str) -> int | None:
        """Points of ``collection`` counted from the files, without opening the store.

        Returns:
            The count (0: no such store or collection), or ``None`` when the engine
            cannot tell without opening the store (then open it and count there).
        """
        return None

    # -- filters --------------------------------------------------------------------------------

    @abstractmethod
    def filter(self, conditions: Conditions | None) -> Any:
        """The engine's own filter for ``conditions`` (``None``: none); imports its library."""
