"""How a CLI command reaches its state: the running daemon, or the state dir itself.

A command that reads or writes the index runs with the :class:`Runner
<ingestd.daemon.client.runner.Runner>` the ``Client`` uses (:func:`runner`): it asks
the daemon of its state dir through the control socket (a daemon that is still
starting is waited for, with a note on a terminal); with no daemon the command opens
the state itself, holding the state-dir lock
(:func:`~ingestd.daemon.client.local.locked_engine`), or only reads the manifest
(:func:`manifest_reader`, without SQLAlchemy for the default SQLite file). The config
is loaded (and its pydantic models built) only when a command needs it (:func:`load`
versus :func:`load_light`), so the fast commands stay fast.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ingestd.daemon.cli.shared.errors import Fatal

if TYPE_CHECKING:
    from ingestd.daemon.client.runner import Runner
    from ingestd.daemon.config import Config
    from ingestd.store.manifest.reader import ManifestReader

__all__ = [
    "BUSY_NOTE_S",
    "busy_note",
    "default_log_level",
    "load",
    "load_light",
    "manifest_reader",
    "runner",
    "setup_logging",
    "source_names",
    "split_targets",
    "with_manifest_sources",
]

logger = logging.getLogger("ingestd")


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
    *,
    daemon: bool = False,
) -> tuple[Config, Path]:
    """The validated config and the state dir (builds the pydantic models).

    Args:
        config_path: ``--config``, or ``None`` for the defaults.
        paths: ``PATH`` arguments (each a source, see
            :func:`~ingestd.daemon.config.load_config`).
        state_flag: ``--state-dir``.
        log_level: ``--log-level`` (default: :func:`default_log_level`).
        daemon: the command is ``ingestd run``.

    Raises:
        Fatal: exit code 2, the config is invalid.
    """
    from ingestd.daemon.config import ConfigError, load_config
    from ingestd.daemon.statedir import resolve_state_dir

    try:
        cfg = load_config(config_path, roots=paths)
    except ConfigError as exc:
        raise Fatal(f"invalid configuration:\n{exc}", 2) from None
    setup_logging(log_level or default_log_level(cfg.log_level, daemon))
    return cfg, resolve_state_dir(state_flag, cfg)


def default_log_level(configured: str, daemon: bool) -> str:
    """The log level of a command given no ``--log-level``.

    The daemon logs at the config's ``log_level``. A one-shot command prints its own
    answer: of the log it shows only what needs attention (``WARNING``), unless the
    config asks for less or more than the default ``INFO`` (``DEBUG``, ``ERROR``).
    """
    return configured if daemon or configured != "INFO" else "WARNING"


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

    setup_logging(log_level or default_log_level("INFO", daemon=False))
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
    from ingestd.daemon.client.local import manifest_for_reading

    if cfg is not None and cfg.manifest.url:
        with manifest_for_reading(cfg, state_dir) as m:
            yield m
        return
    with contextlib.ExitStack() as opened:
        try:
            view = opened.enter_context(manifest_for_reading(cfg, state_dir))
        except PermissionError:
            raise Fatal(
                f"cannot read {_manifest_path(state_dir)} (permission denied); to ask the "
                "running daemon instead, give its control socket with --socket (under "
                "systemd: /run/ingestd/ingestd.sock)"
            ) from None
        except Exception as exc:  # sqlite3.Error: not a manifest
            from ingestd.store.common.damage import StateDamagedError, is_sqlite_damage

            path = _manifest_path(state_dir)
            if is_sqlite_damage(exc):  # the command line names the command that rebuilds it
                raise StateDamagedError(path, "manifest", str(exc)) from None
            raise Fatal(f"cannot read the manifest {path}: {exc}") from None
        yield view


def _manifest_path(state_dir: Path) -> Path:
    from ingestd.daemon.statedir import StatePaths

    return StatePaths(state_dir).manifest


def with_manifest_sources(cfg: Config, state_dir: Path, config_given: bool) -> Config:
    """``cfg`` with the sources the manifest records, when it configures none.

    Without a config file or ``PATH`` arguments a command works on every source the
    state dir knows.
    """
    if cfg.sources or config_given:
        return cfg
    from ingestd.daemon.client.local import with_recorded_sources

    with manifest_reader(cfg, state_dir) as m:
        return with_recorded_sources(cfg, m)


def split_targets(
    cfg: Config, state_dir: Path, targets: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The source names and the ``PATH`` arguments among a command's arguments.

    An argument written without a ``/`` that names a source (of the config, or without
    one of the state dir's manifest) is that source, as ``sync`` takes it; any other
    is a folder (``./docs`` is always the folder).

    Returns:
        ``(names, paths)``.

    Raises:
        Fatal: exit code 2, an argument is neither a known source nor an existing path,
            or names and paths are mixed (a name selects among the configured sources,
            a path makes a source of its own: one command does one or the other).
    """
    if not targets:
        return [], []
    known = [s.name for s in cfg.sources]
    if not known:
        with manifest_reader(cfg, state_dir) as m:
            known = [str(s["name"]) for s in m.sources()] if m is not None else []
    names = [t for t in targets if "/" not in t and t in known]
    paths = [t for t in targets if t not in names]
    unknown = [p for p in paths if "/" not in p and not os.path.exists(p)]
    if unknown:
        raise Fatal(
            f"unknown source(s): {', '.join(unknown)}; known sources: "
            f"{', '.join(known) or 'none'} (or give a folder's PATH, such as ./{unknown[0]})",
            2,
        )
    if names and paths:
        raise Fatal("give source names or PATH arguments, not both", 2)
    return names, paths


def source_names(cfg: Config, paths: Sequence[str]) -> list[str] | None:
    """Names of the sources of ``cfg`` rooted at ``paths``; ``None`` (all) without paths."""
    if not paths:
        return None
    roots = {Path(os.path.realpath(p)) for p in paths}
    return [s.name for s in cfg.sources if Path(s.root) in roots]


def runner(state_dir: Path, socket_path: Path | None) -> Runner:
    """The runner of a command: through the daemon of ``state_dir``, else here.

    A daemon that is starting is waited for, up to
    :data:`~ingestd.daemon.client.runner.START_WAIT_S` seconds, with a one-line note on
    a terminal.

    Args:
        state_dir: the state dir.
        socket_path: ``--socket``: only that daemon is asked, and none answering is an
            error.
    """
    from ingestd.daemon.client.runner import Runner

    return Runner(state_dir, socket=socket_path, on_wait=_note_waiting)


#: Seconds a command waits for a busy daemon's answer before it says so on a terminal.
BUSY_NOTE_S = 2.0


@contextlib.contextmanager
def busy_note(what: str, delay: float = BUSY_NOTE_S) -> Iterator[None]:
    """Say on a terminal, after ``delay`` seconds, that the daemon is still at other work.

    A ``verify`` or ``resync`` sent to a daemon that is writing (a first ingest, a long
    document) waits for the job in flight; without a word it looked hung.

    Args:
        what: the command, named in the note.
        delay: seconds before the note.
    """
    if not sys.stderr.isatty():
        yield
        return

    def note() -> None:
        click.echo(
            f"{what}: the daemon is finishing other work first (`ingestd status` shows what) ...",
            err=True,
        )

    timer = threading.Timer(delay, note)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _note_waiting(pid: int) -> None:
    from ingestd.daemon.client.runner import START_WAIT_S

    if sys.stderr.isatty():
        click.echo(
            f"waiting for ingestd run (pid {pid}) to start serving "
            f"(up to {START_WAIT_S:.0f} s) ...",
            err=True,
        )
