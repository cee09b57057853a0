"""What every command shares: the state and socket options, and ``--json`` output.

After sqlite-utils' ``output_options``: an option that several commands take is one
decorator here, so its name, environment variable and help read the same everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["common_options", "echo_json", "socket_option"]

F = TypeVar("F", bound=Callable[..., Any])


def common_options(f: F) -> F:
    """``--config``, ``--state-dir`` and ``--log-level``, shared by every command."""
    f = click.option(
        "-c",
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="INGESTD_CONFIG",
        help="YAML config file (env INGESTD_CONFIG).",
    )(f)
    f = click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="State dir (default: $INGESTD_STATE_DIR, the config's state_dir, "
        "$STATE_DIRECTORY, then $XDG_STATE_HOME/ingestd).",
    )(f)
    f = click.option(
        "--log-level",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
        default=None,
        help="Log level (default: `run` the config's log_level, INFO; other commands WARNING).",
    )(f)
    return f


def socket_option(f: F) -> F:
    """``--socket``: reach a running daemon by its control socket, not its state dir."""
    return click.option(
        "--socket",
        "socket_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="INGESTD_SOCKET",
        help="Control socket of a running daemon (env INGESTD_SOCKET; default: found "
        "from the state dir). For a daemon whose state dir you cannot read, e.g. "
        "/run/ingestd/ingestd.sock under systemd.",
    )(f)


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON (non-ASCII kept, anything else as ``str``)."""
    click.echo(json.dumps(obj, ensure_ascii=False, indent=2, default=str))
