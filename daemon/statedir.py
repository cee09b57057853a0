"""Where ingestd keeps its state, and keeping it private.

The state dir holds the manifest, the embedding cache and the embedded store: the text
of every indexed chunk. It is created private, whatever the caller's umask: folders
0700, files 0600 (DESIGN.md, "State is private"). The ``ingestd`` command sets its
process umask with :func:`private_umask`, so every file a library creates (SQLite's
``-wal`` and ``-shm`` files, embedded Qdrant's folders) is private too, and
:func:`secure_state_dir` tightens the entries of a state dir written by an earlier
version. A state dir that already exists keeps its own mode (systemd's
``StateDirectoryMode=``, or the operator's choice): only its entries are tightened.

The control socket's fallback folder (when neither systemd's runtime dir nor the
state dir can hold it) is a private per-user folder: ``$XDG_RUNTIME_DIR`` when it is
the user's own and mode 0700, else ``<temp dir>/ingestd-<uid>``, checked for owner and
mode like tmux's and ssh-agent's folders; when another user squats that name, a fresh
``mkdtemp`` folder is used instead, so nobody else can stop the daemon from starting.

This module imports nothing beyond the standard library at import time (fast commands
use it); the embedded engines' folders come from their table,
:data:`ingestd.store.vectors.engines.ENGINES` (light modules, read when needed).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ingestd.chunkers.errors import StateError

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "STATE_ENTRIES",
    "InsecureDirError",
    "StatePaths",
    "check_private_dir",
    "dir_bytes",
    "engine_folder_names",
    "folder_bytes",
    "make_private_dir",
    "private_runtime_dir",
    "private_umask",
    "resolve_state_dir",
    "secure_state_dir",
    "state_dir_bytes",
]

logger = logging.getLogger(__name__)

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class StatePaths:
    """The entries of a state dir, named in this one place (docs/reference/state-dir.md).

    Args:
        root: the state dir.
        engine_paths: embedded engine name -> its store's folder, for the engines whose
            config key (``qdrant.path``, ``qdrant.edge_path``) puts it elsewhere.
    """

    root: Path
    engine_paths: Mapping[str, Path] = field(default_factory=dict, hash=False)

    MANIFEST: ClassVar[str] = "manifest.db"
    EMBEDDINGS: ClassVar[str] = "embeddings.db"
    LOCK: ClassVar[str] = "ingestd.lock"
    QUEUE_LOCK: ClassVar[str] = "ingestd.queue.lock"
    READER_LOCK: ClassVar[str] = "ingestd.reader.lock"
    CLEAN_CLOSE: ClassVar[str] = "clean-close.json"
    SOCKET: ClassVar[str] = "ingestd.sock"
    SOCKET_POINTER: ClassVar[str] = "control-socket"
    EVAL_LEDGER: ClassVar[str] = "eval-collections"

    @property
    def manifest(self) -> Path:
        """The manifest (SQLite, WAL) when no ``manifest.url`` is configured."""
        return self.root / self.MANIFEST

    @property
    def embeddings(self) -> Path:
        """The embedding cache."""
        return self.root / self.EMBEDDINGS

    def engine_folder(self, engine: str) -> Path:
        """The folder of embedded engine ``engine``'s store (configured, else its default).

        Raises:
            ValueError: no engine of that name.
        """
        configured = self.engine_paths.get(engine)
        if configured is not None:
            return configured
        from ingestd.store.vectors.engines import engine_spec

        return self.root / engine_spec(engine).folder

    def engine_folders(self) -> dict[str, Path]:
        """Every embedded engine's folder, by engine name, in the engines' table order."""
        from ingestd.store.vectors.engines import engine_names

        return {name: self.engine_folder(name) for name in engine_names()}

    @property
    def lock(self) -> Path:
        """The lock file held by the one process that writes."""
        return self.root / self.LOCK

    @property
    def socket(self) -> Path:
        """The control socket, when it lives in the state dir."""
        return self.root / self.SOCKET

    @property
    def socket_pointer(self) -> Path:
        """The file naming the control socket's path when it lives elsewhere."""
        return self.root / self.SOCKET_POINTER

    @property
    def eval_ledger(self) -> Path:
        """The ledger of throw-away collections of ``ingestd eval`` runs."""
        return self.root / self.EVAL_LEDGER

    @staticmethod
    def sqlite_files(path: Path) -> list[Path]:
        """``path`` and SQLite's side files beside it (``-wal``, ``-shm``, ``-journal``)."""
        return [path, *(path.with_name(path.name + s) for s in _SQLITE_SIDE_FILES)]


#: Names ingestd creates in a state dir (SQLite's side files included), besides the
#: embedded engines' folders (:func:`engine_folder_names`).
STATE_ENTRIES = (
    *(
        n + side
        for n in (StatePaths.MANIFEST, StatePaths.EMBEDDINGS)
        for side in ("", *_SQLITE_SIDE_FILES)
    ),
    StatePaths.LOCK,
    StatePaths.QUEUE_LOCK,
    StatePaths.READER_LOCK,
    StatePaths.CLEAN_CLOSE,
    StatePaths.SOCKET_POINTER,
    StatePaths.EVAL_LEDGER,
)


def engine_folder_names() -> tuple[str, ...]:
    """The default folder names of the embedded engines' stores in a state dir."""
    from ingestd.store.vectors.engines import engine_specs

    return tuple(spec.folder for spec in engine_specs())


class InsecureDirError(StateError, OSError):
    """A folder that must be private is not: another owner, a symlink, or open modes."""


def dir_bytes(path: Path, *, follow_symlinks: bool = False) -> int:
    """Bytes of the files under ``path`` (a folder; a missing one holds 0).

    Args:
        path: the folder, walked without entering linked folders.
        follow_symlinks: count a link to a file by its target's size (a model in the
            Hugging Face cache is a folder of links to its blobs); else by the link's
            own size. A file that vanishes or cannot be read counts 0.
    """
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f), follow_symlinks=follow_symlinks).st_size
            except OSError:
                pass
    return total


def folder_bytes(state_dir: Path, known: Mapping[str, int] | None = None) -> dict[str, int]:
    """Bytes each folder of the state dir takes on disk, by name: allocated blocks.

    Each folder is walked (its cost is what the folder holds: a million points' store
    is thousands of files), except those ``known`` gives. An embedded engine's folder
    counts what its spec's :meth:`~ingestd.store.vectors.spec.EngineSpec.disk_bytes`
    says (allocated blocks by default), any other folder (a git mirror, a site's pages)
    its files' allocated blocks. Links are not followed: a linked folder is no folder
    here. What a writer measured at its clean close is kept in the clean-close record
    (:mod:`ingestd.daemon.sync.state.clean_close`), so ``status`` walks nothing while
    nothing wrote since.

    Args:
        state_dir: the state dir (a missing one has no folders).
        known: folder name -> its bytes as measured earlier, taken as they are.

    Returns:
        Folder name -> its allocated size in bytes.
    """
    return _measure(state_dir, known)[1]


def state_dir_bytes(state_dir: Path, known: Mapping[str, int] | None = None) -> int:
    """Bytes the state dir takes on disk: allocated blocks, what ``du`` counts.

    Every file counts the blocks the file system allocated to it (``st_blocks * 512``),
    not its apparent size: Qdrant Edge maps large, mostly empty (sparse) files, whose
    apparent size can be forty times their cost on disk. The state dir is listed once
    (one ``os.scandir``, one ``stat`` per file: the manifest, its WAL, the embedding
    cache, the locks); its folders count what :func:`folder_bytes` says, so a folder
    ``known`` gives is not walked. Links are not followed.

    Args:
        state_dir: the state dir (a missing one holds 0).
        known: folder name -> its bytes as measured earlier (a clean close's record,
            the daemon's last measurement while the manifest is unchanged).

    Returns:
        The allocated size in bytes.
    """
    files, folders = _measure(state_dir, known)
    return files + sum(folders.values())


def _measure(state_dir: Path, known: Mapping[str, int] | None) -> tuple[int, dict[str, int]]:
    """``(bytes of the state dir's files, {folder: bytes})`` from one listing of it."""
    from ingestd.store.vectors.engines import engine_specs
    from ingestd.store.vectors.spec import allocated_bytes

    known = known or {}
    files, folders = 0, {}
    specs: dict[str, Any] | None = None
    try:
        entries = list(os.scandir(state_dir))
    except OSError:
        return 0, {}
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False):
                files += entry.stat(follow_symlinks=False).st_blocks * 512
            elif entry.name in known:
                folders[entry.name] = known[entry.name]
            else:
                if specs is None:
                    specs = {spec.folder: spec for spec in engine_specs()}
                spec, path = specs.get(entry.name), Path(entry.path)
                folders[entry.name] = (
                    spec.disk_bytes(path) if spec is not None else allocated_bytes(path)
                )
        except OSError:
            continue
    return files, folders


def resolve_state_dir(flag: str | Path | None, cfg: Any = None) -> Path:
    """The state dir: flag, ``$INGESTD_STATE_DIR``, config, ``$STATE_DIRECTORY``, XDG.

    Args:
        flag: ``--state-dir``.
        cfg: the loaded config (anything with a ``state_dir`` attribute), or ``None``.

    Under systemd ``$STATE_DIRECTORY`` may list several folders separated by ``:``;
    the first is used. The last resort is ``$XDG_STATE_HOME/ingestd``
    (``~/.local/state/ingestd``).
    """
    if flag:
        return Path(flag).expanduser().absolute()
    env = os.environ.get("INGESTD_STATE_DIR")
    if env:
        return Path(env).expanduser().absolute()
    configured = getattr(cfg, "state_dir", None)
    if configured is not None:
        return Path(configured).expanduser().absolute()
    sd = os.environ.get("STATE_DIRECTORY")
    if sd:
        return Path(sd.split(":")[0])
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "ingestd"


def private_umask() -> int:
    """Add group and other bits to the process umask (``umask | 0o077``); returns the old one.

    Every file and folder the process creates from then on is private, whatever the
    caller's umask (systemd's ``UMask=0027`` becomes 0077). Sockets that must be
    shared are ``chmod``-ed explicitly (:class:`~ingestd.daemon.service.control.ControlServer`).
    """
    old = os.umask(0o077)
    os.umask(old | 0o077)
    return old


def make_private_dir(path: Path) -> Path:
    """Create ``path`` and its missing parents with mode 0700; an existing folder is kept.

    Returns:
        ``path``.

    Raises:
        OSError: a folder cannot be created (e.g. a file is in the way).
    """
    path = Path(path)
    missing: list[Path] = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # created meanwhile by someone else: left as it is
        os.chmod(d, PRIVATE_DIR_MODE)  # mkdir's mode is masked by the umask; be exact
    return path


def _tighten(p: Path, st: os.stat_result) -> bool:
    """Take the group and other bits off ``p`` (not a symlink); whether it was done."""
    if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o077:
        return False
    try:
        os.chmod(p, stat.S_IMODE(st.st_mode) & ~0o077)
    except OSError as exc:
        logger.warning("cannot make %s private: %s", p, exc.strerror or exc)
        return False
    return True


def _tighten_tree(top: Path) -> int:
    """Tighten every folder and file below ``top`` (links not followed); returns how many."""
    n = 0
    for dirpath, dirnames, filenames in os.walk(top):
        for name in (*dirnames, *filenames):
            p = Path(dirpath, name)
            try:
                n += _tighten(p, p.lstat())
            except OSError:
                continue  # vanished meanwhile
    return n


def secure_state_dir(state_dir: Path, stores: Iterable[Path] = (), *, inside: bool = True) -> Path:
    """Create the state dir private, or take group and other bits off its known entries.

    A state dir written by an earlier version under a loose umask left the manifest
    and the store's chunk text readable by others: each entry of :data:`STATE_ENTRIES`
    and each embedded engine's folder loses its group and other permission bits, and so
    does everything inside those folders (``qdrant/``, ``edge/``, and ``stores``
    elsewhere), whose
    engines create folders 0755 and files 0644 under such a umask (logged once). The
    state dir's own mode is left alone when it exists.

    Args:
        state_dir: the state dir.
        stores: embedded store folders configured outside it (``qdrant.path``,
            ``qdrant.edge_path``), tightened with everything inside them (the engines'
            folders inside it always are).
        inside: walk every store folder's tree (thousands of files at a million
            points); ``False``: only a folder that itself had to be made private (its
            files were made under the same loose umask). Behind a private folder the
            files are out of others' reach anyway.

    Returns:
        ``state_dir``.
    """
    state_dir = Path(state_dir)
    if not state_dir.exists():
        make_private_dir(state_dir)
    fixed = []
    engines = engine_folder_names()
    for name in (*STATE_ENTRIES, *engines):
        p = state_dir / name
        try:
            if _tighten(p, p.lstat()):
                fixed.append(name)
        except OSError:
            continue
    tops = [state_dir / n for n in engines]
    for top in stores:
        top = Path(top)
        if top not in tops:
            try:
                if _tighten(top, top.lstat()):
                    fixed.append(str(top))
            except OSError:
                continue
            tops.append(top)
    loose = {state_dir / name for name in fixed} | {Path(name) for name in fixed}
    for top in tops:
        if (inside or top in loose) and top.is_dir() and not top.is_symlink():
            n = _tighten_tree(top)
            if n:
                fixed.append(f"{n} entries in {top.name}/")
    if fixed:
        logger.info("made state files private (mode 0600/0700): %s", ", ".join(fixed))
    return state_dir


def check_private_dir(path: Path) -> None:
    """Check that ``path`` is a real folder of this user that nobody else can enter.

    Raises:
        InsecureDirError: it is a symlink, not a folder, owned by another user, or has
            group or other permission bits.
        OSError: it cannot be examined.
    """
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise InsecureDirError(f"{path} is not a folder (a symlink or a file)")
    if st.st_uid != os.getuid():
        raise InsecureDirError(f"{path} belongs to uid {st.st_uid}, not to uid {os.getuid()}")
    if st.st_mode & 0o077:
        raise InsecureDirError(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}, not 0700")


def private_runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """A private folder of this user for the control socket (see the module docstring).

    Args:
        env: environment to read ``XDG_RUNTIME_DIR`` from (default ``os.environ``).

    Returns:
        ``$XDG_RUNTIME_DIR`` when it passes :func:`check_private_dir`, else
        ``<temp dir>/ingestd-<uid>`` (created 0700), else a fresh ``mkdtemp`` folder when
        that name is taken by someone else.
    """
    import tempfile

    e = env if env is not None else os.environ
    xdg = e.get("XDG_RUNTIME_DIR")
    if xdg:
        try:
            check_private_dir(Path(xdg))
            return Path(xdg)
        except OSError as exc:
            logger.warning("not using XDG_RUNTIME_DIR for the control socket: %s", exc)
    base = Path(tempfile.gettempdir())
    mine = base / f"ingestd-{os.getuid()}"
    try:
        mine.mkdir(mode=PRIVATE_DIR_MODE)
        os.chmod(mine, PRIVATE_DIR_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        logger.warning("cannot create %s: %s", mine, exc.strerror or exc)
        return Path(tempfile.mkdtemp(prefix=f"ingestd-{os.getuid()}-", dir=base))
    try:
        check_private_dir(mine)
        return mine
    except OSError as exc:
        logger.warning("not using %s for the control socket: %s", mine, exc)
        return Path(tempfile.mkdtemp(prefix=f"ingestd-{os.getuid()}-", dir=base))
