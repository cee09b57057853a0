"""What a command's failure becomes: one line on stderr and an exit code.

A :class:`Fatal` is a known failure (its message and exit code are the user's answer).
:func:`handle_errors` wraps each command: it turns the known errors of the rest of the
package (an :class:`~ingestd.chunkers.errors.IngestdError`, whose class carries the exit
code; the tree is drawn in :mod:`ingestd.daemon.errors`) into a :class:`Fatal`, exits
130 on Ctrl-C and 0 when the reader of a pipe goes away, and logs anything unexpected
(traceback in the log, exit 3). A package that is not installed is no surprise: an
extra's says which extra installs it (exit 1, as a missing store library or backend),
another's that the install is incomplete.
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["Fatal", "handle_errors"]

logger = logging.getLogger("ingestd")
F = TypeVar("F", bound=Callable[..., Any])


class Fatal(click.ClickException):
    """A known failure: message on stderr, exit code 1 (or the given one)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]


def handle_errors(f: F) -> F:
    """Turn known errors into one-line messages and exit codes; log the unexpected."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("Interrupted (^C)", err=True)
            sys.exit(130)
        except BrokenPipeError:
            # the reader went away (`ingestd chunk F | head`): stop quietly, as cat does
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(0)
        except Exception as exc:
            from ingestd.chunkers.errors import IngestdError
            from ingestd.store.common.damage import StateDamagedError, is_disk_full

            if isinstance(exc, IngestdError):  # raised here or by the daemon, alike
                message = str(exc)
                if isinstance(exc, StateDamagedError):
                    message += f"; `{_rebuild_command(kwargs)}` rebuilds it"
                raise Fatal(message, exc.exit_code) from None
            if isinstance(exc, ImportError):
                _missing_package(exc)
            if is_disk_full(exc):
                logger.debug("disk full", exc_info=True)
                detail = str(getattr(exc, "orig", None) or exc).splitlines()[0]
                raise Fatal(
                    f"no space left on the device of the state dir ({detail}); nothing was "
                    "lost: free some space and run the command again"
                ) from None
            logger.error("unexpected error: %s: %s", type(exc).__name__, exc, exc_info=True)
            click.echo(f"ingestd: unexpected error: {type(exc).__name__}: {exc}", err=True)
            sys.exit(3)

    return wrapper  # type: ignore[return-value]


def _missing_package(exc: ImportError) -> None:
    """A package that is not installed, said in one line with how to install it.

    Raises:
        Fatal: ``exc`` is an extra's package missing (the hint names the extra), or
            another package's (ingestd's install is incomplete); nothing raised when
            ``exc`` names no module (an error inside a module that is there).
    """
    from ingestd.store.common.extras import extra_hint, extra_of

    logger.debug("import failed", exc_info=True)
    extra = extra_of(exc)
    if extra is not None:
        raise Fatal(f"this needs {extra_hint(extra)}: {exc}") from None
    if isinstance(exc, ModuleNotFoundError) and exc.name and not exc.name.startswith("ingestd"):
        raise Fatal(
            f"{exc}: ingestd's install is incomplete; install it again "
            "(`pip install ingestd`, or in a clone of the repository: `pip install .`)"
        ) from None


def _rebuild_command(kwargs: dict[str, Any]) -> str:
    """``ingestd resync --rebuild`` with the options and PATHs the failed command had."""
    words = ["ingestd", "resync", "--rebuild"]
    if kwargs.get("config_path"):
        words += ["--config", str(kwargs["config_path"])]
    if kwargs.get("state_dir"):
        words += ["--state-dir", str(kwargs["state_dir"])]
    words += [str(p) for p in kwargs.get("paths") or ()]
    return shlex.join(words)
