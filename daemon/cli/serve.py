"""``ingestd run``: the daemon in the foreground, until SIGTERM or SIGINT.

The command builds the config, then hands over to
:class:`~ingestd.daemon.service.service.Service`; SIGHUP reloads the config through the
same loader. Until the service installs its own handlers (a stop that finishes the write
in flight), SIGINT and SIGTERM end the process at once with status 0, since nothing has
started that a stop would have to finish
(:func:`~ingestd.daemon.startstop.stop_before_start`; the console script takes them before
it imports the CLI, the command again for a caller that did not).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ingestd.daemon.cli.shared.errors import Fatal, handle_errors
from ingestd.daemon.cli.shared.options import common_options
from ingestd.daemon.cli.shared.state import load

if TYPE_CHECKING:
    from ingestd.daemon.config import Config

__all__ = ["run"]


@click.command()
@common_options
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False))
@handle_errors
def run(
    config_path: Path | None, state_dir: Path | None, log_level: str | None, paths: tuple[str, ...]
) -> None:
    """Watch the sources and keep the store in sync until SIGTERM/SIGINT.

    Opens the store, sets the watches, serves the control socket, tells systemd it
    is ready, then reconciles every source in the background. SIGHUP reloads the
    config; SIGTERM finishes the write batch in flight and exits 0.

    Example:

    
        ingestd run --state-dir ./state ./docs
    """
    from ingestd.daemon.startstop import stop_before_start

    with stop_before_start() as hup:  # first of all (the console script took them earlier)
        _run(config_path, state_dir, log_level, paths, hup)


def _run(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    paths: tuple[str, ...],
    hup: threading.Event,
) -> None:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.service.service import Service
    from ingestd.daemon.watch.watcher import default_backend
    from ingestd.daemon.wire.statelock import StateLockedError

    cfg, sd = load(config_path, paths, state_dir, log_level, daemon=True)
    _say_fatal_signals()
    if not cfg.sources:
        raise Fatal("nothing to watch: give PATH arguments or sources in --config", 2)
    try:
        default_backend()
    except ValueError as exc:  # INGESTD_WATCH_BACKEND names no backend
        raise Fatal(str(exc), 2) from None

    def reload() -> Config:
        return load_config(config_path, roots=paths)

    try:
        config = config_path.resolve() if config_path is not None else None
        service = Service(cfg, sd, reload_config=reload, config_path=config)
        if hup.is_set():  # the config may have changed after it was read
            service.request_reload()
        code = service.serve()  # installs the service's own signal handlers first
    except StateLockedError as exc:
        raise Fatal(str(exc)) from None
    # Everything is closed and logged ("ingestd stopped"): skip the interpreter's
    # teardown of torch and its thread pools, which takes seconds (systemd's stop
    # timeout and SIGTERM's promise count them).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _say_fatal_signals() -> None:
    """Have a fatal signal (SIGBUS, SIGSEGV) leave its line and tracebacks on stderr.

    A file the vector engine maps, cut under the daemon in the middle of a job, kills it
    with SIGBUS; the service checks those files before each job, and this is the floor
    for a cut that lands during one: ``Fatal Python error: Bus error`` and each thread's
    stack in the log (the journal under systemd), never a silent death.
    """
    import faulthandler
    import io

    for stream in (sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            faulthandler.enable(file=stream, all_threads=True)
            return
        except (AttributeError, ValueError, io.UnsupportedOperation):
            continue
