"""The state dir opened by this process, when no daemon runs.

:func:`locked_engine` is how the CLI and the :class:`LocalState` of a ``Client`` open
it: take the state-dir lock (naming the holder), open an
:class:`~ingestd.daemon.engine.Engine` (the manifest, and the store when the
command reads it), run, close it and release the lock, so an ``ingestd run`` or another
command can take the state dir between calls. What a long-lived caller (an
MCP server, an application) must not pay at every call is kept: the embedding models,
loaded on the first dense or hybrid query (:class:`SharedModels`).

Without a config file, the sources are those the manifest records, as for ``ingestd
search``; calls are serialised within the process (one lock holder at a time).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ingestd.daemon.wire.errors import DaemonError
from ingestd.daemon.wire.statelock import WRITER_WAIT_S, ReadLock, StateLock

if TYPE_CHECKING:
    from ingestd.daemon.config import Config
    from ingestd.daemon.engine import Engine
    from ingestd.store.manifest.reader import ManifestReader

__all__ = [
    "LocalState",
    "SharedModels",
    "locked_engine",
    "manifest_for_reading",
    "nothing_indexed",
    "with_recorded_sources",
]

T = TypeVar("T")


@contextlib.contextmanager
def manifest_for_reading(cfg: Config | None, state_dir: Path) -> Iterator[ManifestReader | None]:
    """The manifest for reading, or ``None`` when nothing was indexed yet.

    A SQLite manifest is read with :class:`~ingestd.store.manifest.view.ManifestView`
    (no SQLAlchemy; nothing is created); a ``manifest.url`` database with the full
    manifest. The CLI (:func:`~ingestd.daemon.cli.shared.state.manifest_reader`, which
    words its errors for a person) and a ``Client`` with no daemon read it here.

    Raises:
        PermissionError: the manifest's file cannot be read.
        sqlite3.Error: the file is not a manifest (damaged, or another file).
    """
    if cfg is not None and cfg.manifest.url:
        from ingestd.store.manifest.manifest import Manifest

        full = Manifest(cfg.manifest.url)
        try:
            yield full
        finally:
            full.close()
        return
    from ingestd.daemon.statedir import StatePaths
    from ingestd.store.manifest.view import ManifestView

    path = StatePaths(state_dir).manifest
    try:
        exists = path.is_file()
    except PermissionError:
        exists = True  # let the open below say so
    if not exists:
        yield None
        return
    with ManifestView(path) as view:
        yield view


def nothing_indexed(
    state_dir: Path,
    *,
    given_state_dir: Path | None = None,
    config: Path | None = None,
    paths: Sequence[str] = (),
) -> str:
    """The "nothing indexed" message, with the ``resync`` that indexes what was asked.

    The command suggested is called as the command that found nothing was: with its
    config (``--config FILE``, which names the sources), its ``PATH`` arguments, and
    its state dir when one was given (else the resync would index into another).

    Args:
        state_dir: the state dir the command read.
        given_state_dir: the ``--state-dir`` it was given (``None``: none).
        config: the config file it was given (``None``: none).
        paths: its ``PATH`` arguments.

    Returns:
        ``nothing indexed in DIR: run `ingestd resync ...` first``.
    """
    import shlex

    words = ["ingestd", "resync"]
    if config is not None:
        words += ["--config", str(config)]
    if given_state_dir is not None:
        words += ["--state-dir", str(given_state_dir)]
    words += list(paths) if paths or config is not None else ["PATH"]
    return f"nothing indexed in {state_dir}: run `{shlex.join(words)}` first"


def with_recorded_sources(cfg: Config, manifest: ManifestReader | None) -> Config:
    """``cfg`` with the sources ``manifest`` records (as local folders) instead of its own.

    What a command or a ``Client`` works on when no config names a source: every source
    the state dir knows (none when nothing was indexed: ``manifest`` is ``None``).
    """
    from ingestd.daemon.sources.local import LocalSourceConfig

    recorded = manifest.sources() if manifest is not None else []
    sources = tuple(
        LocalSourceConfig(name=s["name"], root=Path(s["root"]), collection=s["collection"])
        for s in recorded
    )
    return cfg.model_copy(update={"sources": sources})


@contextlib.contextmanager
def locked_engine(
    cfg: Config,
    state_dir: Path,
    what: str,
    *,
    model_factory: Callable[[Any], Callable[[Sequence[str]], Any]] | None = None,
    read_only: bool = False,
    wait_s: float = WRITER_WAIT_S,
) -> Iterator[Engine]:
    """The engine of ``state_dir``, opened under its lock; closed, then the lock released.

    Args:
        cfg: the config the engine runs.
        state_dir: the state dir.
        what: names the writer's lock holder (``ingestd resync``).
        model_factory: makes the embedding callables (:class:`SharedModels`); default:
            the engine loads its own.
        read_only: the command only reads: the readers' lock, a reader's engine.
        wait_s: seconds a writer waits for readers still in the state dir.

    Raises:
        ingestd.daemon.wire.statelock.StateLockedError: another writer holds the state
            dir (an ``ingestd run`` that is starting included:
            :class:`~ingestd.daemon.client.runner.Runner` then asks it instead), or
            readers kept it past ``wait_s``.
    """
    from ingestd.daemon.engine import Engine

    lock: ReadLock | StateLock
    if read_only:
        lock = ReadLock(state_dir, store=True)
        lock.acquire()
    else:
        lock = StateLock(state_dir)
        lock.acquire(what, wait_s=wait_s)
    try:
        engine = Engine(cfg, state_dir, model_factory=model_factory, read_only=read_only)
        try:
            yield engine
        finally:
            engine.close()
    finally:
        lock.release()


class SharedModels:
    """Makes the embedding callable of a model once per process (the engines' ``model_factory``).

    Args:
        cfg: the config whose ``embedding`` settings (device, batch size, threads, ONNX
            cache) the models are loaded with.
    """

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._models: dict[str, Callable[[Sequence[str]], Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, info: Any) -> Callable[[Sequence[str]], Any]:
        """The embedding callable of ``info`` (a ``ModelInfo``); its weights load on first use."""
        from ingestd.store.embedding.embedder import load_embedder

        with self._lock:
            model = self._models.get(info.fingerprint)
            if model is None:
                e = self.cfg.embedding
                model = load_embedder(
                    info,
                    device=e.device,
                    batch_size=e.batch_size,
                    threads=e.threads,
                    cache_dir=e.cache_dir,
                )
                self._models[info.fingerprint] = model
            return model


class LocalState:
    """Runs commands on the state dir itself (see the module docstring).

    Args:
        state_dir: the state dir.
        config_path: the config file, or ``None`` for the defaults and the recorded
            sources.
        what: names the lock's holder (``ingestd mcp``).
    """

    def __init__(self, state_dir: Path, config_path: Path | None, what: str) -> None:
        self.state_dir = Path(state_dir)
        self.config_path = config_path
        self.what = what
        self._lock = threading.Lock()
        self._models: SharedModels | None = None
        self._running: Engine | None = None

    def config(self) -> Config:
        """The config, with the sources the manifest records when it configures none.

        Read again at each call: an ``ingestd resync PATH`` meanwhile adds a source.

        Raises:
            ingestd.daemon.config.ConfigError: the config file is invalid.
        """
        from ingestd.daemon.config import load_config

        cfg = load_config(self.config_path)
        if cfg.sources or self.config_path is not None:
            return cfg
        with self.manifest() as m:
            return with_recorded_sources(cfg, m)

    def manifest(
        self, cfg: Config | None = None
    ) -> contextlib.AbstractContextManager[ManifestReader | None]:
        """The manifest for reading, or ``None`` (see :func:`manifest_for_reading`)."""
        return manifest_for_reading(cfg, self.state_dir)

    def interrupt(self) -> None:
        """Ask the engine of the call running now, if any, to stop at its next checkpoint."""
        engine = self._running
        if engine is not None:
            engine.checkpoints.stop.set()

    def run(
        self,
        fn: Callable[[Engine], T],
        *,
        stop_after: float | None = None,
        read_only: bool = False,
    ) -> T:
        """``fn(engine)`` on the state dir, under its lock.

        Args:
            fn: the command.
            stop_after: seconds after which the engine is asked to stop long work at its
                next checkpoint (a sync then ends ``interrupted``).
            read_only: ``fn`` only reads (see :func:`locked_engine`).

        Raises:
            DaemonError: nothing is indexed in the state dir (exit code 1): no source,
                or (``read_only``) configured sources never synced.
            ingestd.daemon.wire.statelock.StateLockedError: another process holds
                the state dir.
        """
        with self._lock:
            cfg = self.config()
            unsynced = (
                read_only
                and not cfg.manifest.url
                and not cfg.paths(self.state_dir).manifest.exists()
            )
            if not cfg.sources or unsynced:  # a reader of configured sources never synced
                from ingestd.daemon.statedir import resolve_state_dir

                named = self.state_dir != resolve_state_dir(None, cfg)  # not the default one
                raise DaemonError(
                    nothing_indexed(
                        self.state_dir,
                        given_state_dir=self.state_dir if named else None,
                        config=self.config_path,
                    ),
                    1,
                )
            if self._models is None:
                self._models = SharedModels(cfg)
            with locked_engine(
                cfg,
                self.state_dir,
                self.what,
                model_factory=self._models,
                read_only=read_only,
            ) as engine:
                self._running = engine
                timer = None
                if stop_after is not None:
                    timer = threading.Timer(stop_after, engine.checkpoints.stop.set)
                    timer.daemon = True
                    timer.start()
                try:
                    return fn(engine)
                finally:
                    self._running = None
                    if timer is not None:
                        timer.cancel()
