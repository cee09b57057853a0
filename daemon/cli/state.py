"""How a CLI command reaches its state: the running daemon, or the state dir itself.

A command that reads or writes the index first asks the daemon of its state dir
through the control socket (:func:`ask_daemon`; a daemon that is still starting is
waited for); with no daemon it opens the state itself, holding the state-dir lock
(:func:`local_engine`), or only reads the manifest (:func:`manifest_reader`, without
SQLAlchemy for the default SQLite file). :func:`run_command` puts the two together.
The config is loaded (and its pydantic models built) only when a command needs it
(:func:`load` versus :func:`load_light`), so the fast commands stay fast.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ingestd.daemon.cli.errors import Fatal

if TYPE_CHECKING:
    from ingestd.daemon.config import Config
    from ingestd.store.manifest.reader import ManifestReader

__all__ = [
    "START_WAIT_S",
    "DaemonStarting",
    "ask_daemon",
    "load",
    "load_light",
    "local_engine",
    "manifest_reader",
    "run_command",
    "setup_logging",
    "source_names",
    "with_manifest_sources",
]

logger = logging.getLogger("ingestd")
#: Seconds a command waits for the socket of an ``ingestd run`` that is starting.
START_WAIT_S = 60.0


class DaemonStarting(Exception):
    """The state-dir lock is held by an ``ingestd run`` whose socket does not serve yet."""


def setup_logging(level: str = "INFO") -> None:
    """One stderr handler on the ``ingestd`` logger; no timestamps under journald."""
    for h in list(logger.handlers):
        if getattr(h, "_ingestd", False):
            logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler._ingestd = True  # type: ignore[attr-defined]
    if os.environ.get("JOURNAL_STREAM") or os.environ.get("INVOCATION_ID"):
        fmt = "%(levelname)s %(name)s: %(message)s"
    else:
        fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    handler.setFormatter(logging.Formatter(fmt, "%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def load(
    config_path: Path | None,
    paths: Sequence[str],
    state_flag: Path | None,
    log_level: str | None,
) -> tuple[Config, Path]:
    """The validated config and the state dir (builds the pydantic models).

    Args:
        config_path: ``--config``, or ``None`` for the defaults.
        paths: ``PATH`` arguments (each a source, see
            :func:`~ingestd.daemon.config.load_config`).
        state_flag: ``--state-dir``.
        log_level: ``--log-level`` (default: the config's).

    Raises:
        Fatal: exit code 2, the config is invalid.
    """
    from ingestd.daemon.config import ConfigError, load_config
    from ingestd.daemon.statedir import resolve_state_dir

    try:
        cfg = load_config(config_path, roots=paths)
    except ConfigError as exc:
        raise Fatal(f"invalid configuration:\n{exc}", 2) from None
    setup_logging(log_level or cfg.log_level)
    return cfg, resolve_state_dir(state_flag, cfg)


def load_light(
    config_path: Path | None, state_flag: Path | None, log_level: str | None
) -> tuple[Config | None, Path]:
    """Like :func:`load`, but without a config file nothing is validated or built.

    Returns:
        ``(None, state dir)`` without ``--config``; else what :func:`load` returns.
    """
    if config_path is not None:
        return load(config_path, (), state_flag, log_level)
    from ingestd.daemon.statedir import resolve_state_dir

    setup_logging(log_level or "INFO")
    return None, resolve_state_dir(state_flag, None)


@contextlib.contextmanager
def manifest_reader(cfg: Config | None, state_dir: Path) -> Iterator[ManifestReader | None]:
    """The manifest for reading, or ``None`` when nothing was indexed yet.

    A SQLite manifest is read with :class:`~ingestd.store.manifest.view.ManifestView`
    (no SQLAlchemy); a ``manifest.url`` database with the full manifest. Nothing is
    created.

    Raises:
        Fatal: the manifest cannot be read (permission denied, not a database).
    """
    if cfg is not None and cfg.manifest.url:
        from ingestd.store.manifest.manifest import Manifest

        m = Manifest(cfg.manifest.url)
        try:
            yield m
        finally:
            m.close()
        return
    from ingestd.daemon.statedir import StatePaths

    path = StatePaths(state_dir).manifest
    try:
        exists = path.is_file()
    except PermissionError:
        exists = True  # let the open below say so
    if not exists:
        yield None
        return
    from ingestd.store.manifest.view import ManifestView

    try:
        view = ManifestView(path)
    except PermissionError:
        raise Fatal(
            f"cannot read {path} (permission denied); to ask the running daemon instead, "
            "give its control socket with --socket (under systemd: /run/ingestd/ingestd.sock)"
        ) from None
    except Exception as exc:  # sqlite3.Error: not a manifest
        from ingestd.store.common.damage import StateDamagedError, is_sqlite_damage

        if is_sqlite_damage(exc):  # the command line names the command that rebuilds it
            raise StateDamagedError(path, "manifest", str(exc)) from None
        raise Fatal(f"cannot read the manifest {path}: {exc}") from None
    with view:
        yield view


def with_manifest_sources(cfg: Config, state_dir: Path, config_given: bool) -> Config:
    """``cfg`` with the sources the manifest records, when it configures none.

    Without a config file or ``PATH`` arguments a command works on every source the
    state dir knows.
    """
    if cfg.sources or config_given:
        return cfg
    from ingestd.daemon.config import SourceConfig

    with manifest_reader(cfg, state_dir) as m:
        recorded = m.sources() if m is not None else []
    sources = tuple(
        SourceConfig(name=s["name"], root=Path(s["root"]), collection=s["collection"])
        for s in recorded
    )
    return cfg.model_copy(update={"sources": sources})


def source_names(cfg: Config, paths: Sequence[str]) -> list[str] | None:
    """Names of the sources of ``cfg`` rooted at ``paths``; ``None`` (all) without paths."""
    if not paths:
        return None
    roots = {Path(os.path.realpath(p)) for p in paths}
    return [s.name for s in cfg.sources if Path(s.root) in roots]


@contextlib.contextmanager
def local_engine(cfg: Config, state_dir: Path, what: str) -> Iterator[Any]:
    """The engine of ``state_dir``, holding its lock (``what`` names the holder).

    Raises:
        DaemonStarting: an ``ingestd run`` holds the lock and is still starting.
        Fatal: another process holds the lock.
    """
    from ingestd.daemon.sync.engine import Engine
    from ingestd.daemon.wire.statelock import StateLock, StateLockedError, starting_daemon

    lock = StateLock(state_dir)
    try:
        lock.acquire(what)
    except StateLockedError as exc:
        if starting_daemon(state_dir) is not None:
            raise DaemonStarting() from None
        raise Fatal(str(exc)) from None
    try:
        engine = Engine(cfg, state_dir)
        try:
            yield engine
        finally:
            engine.close()
    finally:
        lock.release()


def _note_waiting(pid: int) -> None:
    if sys.stderr.isatty():
        click.echo(
            f"waiting for ingestd run (pid {pid}) to start serving "
            f"(up to {START_WAIT_S:.0f} s) ...",
            err=True,
        )


def ask_daemon(
    state_dir: Path, cmd: str, args: dict[str, Any], socket_path: Path | None = None
) -> tuple[bool, Any]:
    """Ask the daemon of ``state_dir``; ``(False, None)`` when none runs.

    A daemon that is starting (it holds the state dir, its socket does not serve yet)
    is waited for, up to :data:`START_WAIT_S` seconds, with a one-line note on a
    terminal. With ``socket_path``, no daemon answering there is an error.
    """
    from ingestd.daemon.wire.errors import DaemonError, NoDaemon
    from ingestd.daemon.wire.protocol import request_when_ready

    try:
        return True, request_when_ready(
            state_dir,
            cmd,
            args,
            socket_path=socket_path,
            wait=START_WAIT_S,
            on_wait=_note_waiting,
        )
    except NoDaemon:
        if socket_path is not None:
            raise Fatal(f"no ingestd daemon answers on {socket_path}") from None
        return False, None
    except DaemonError as exc:
        raise Fatal(str(exc), exc.exit_code) from None


def run_command(
    state_dir: Path,
    cmd: str,
    args: dict[str, Any],
    socket_path: Path | None,
    local: Callable[[], Any],
) -> Any:
    """Run ``cmd`` through the daemon when one runs, else ``local()``.

    ``local`` opens the state under its lock (:func:`local_engine`); when a starting
    daemon takes the lock first, the command waits for its socket instead.

    Args:
        state_dir: the state dir.
        cmd: the control command (``resync``, ``search``, ...).
        args: its JSON arguments.
        socket_path: ``--socket``: only that daemon is asked, and it must answer.
        local: runs the command without a daemon.

    Raises:
        Fatal: the daemon reported an error, or none answers on ``socket_path``.
    """
    ok, result = ask_daemon(state_dir, cmd, args, socket_path)
    if ok:
        return result
    try:
        return local()
    except DaemonStarting:  # it took the lock after we looked: wait for its socket
        ok, result = ask_daemon(state_dir, cmd, args)
        if not ok:
            raise Fatal(
                f"state dir {state_dir} is in use by another ingestd process; "
                "stop it or use another --state-dir"
            ) from None
        return result
