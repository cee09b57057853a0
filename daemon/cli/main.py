"""The ``ingestd`` command line (click): the group, its commands, the entry point.

Exit codes (after pre-commit's ``error_handler.py``; :mod:`~ingestd.daemon.cli.shared.errors`
maps errors to them): 0 success, 1 a known failure (``verify`` found differences, a
locked state dir, files left to retry), 2 a usage or config error (an unknown source
name included), 3 deletions held by the mass-deletion guard (``resync``) or an
unexpected error, 130 interrupted. ``ingestd run`` is the exception to the last: Ctrl-C
(SIGINT) asks it to stop, as SIGTERM does, and a requested stop exits 0; a second
signal before it has stopped forces the stop and exits 1.

Start-up cost is part of the interface: the modules of this package import click, the
standard library and each other only, and each command imports what it needs.
``--help``, ``status``, ``sources`` and a ``search`` answered by a running daemon build
no pydantic model and import neither SQLAlchemy, tiktoken, qdrant-client nor torch
(``bench/cli.py`` times them; ``tests/daemon/cli/test_cli_operator.py`` checks the imports).
How a command reaches the daemon or the state dir is :mod:`~ingestd.daemon.cli.shared.state`.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from ingestd.daemon.cli.consumers import mcp_cmd, ui_cmd
from ingestd.daemon.cli.embedding import export_model, migrate
from ingestd.daemon.cli.index import forget, resync, sources, sync_sources, verify
from ingestd.daemon.cli.query import read, search, status
from ingestd.daemon.cli.serve import run
from ingestd.daemon.cli.takeover import takeover
from ingestd.daemon.cli.tuning import chunk_cmd, eval_cmd

__all__ = ["cli", "main"]

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="ingestd", prog_name="ingestd")
def cli() -> None:
    """Keep a Qdrant collection in sync with documentation trees.

    Example:

    
        ingestd run ./docs            # watch ./docs, index it, keep it in sync
        ingestd search "how do I configure the exporter"
    """


cli.add_command(run)
cli.add_command(resync)
cli.add_command(sync_sources)
cli.add_command(search)
cli.add_command(read)
cli.add_command(status)
cli.add_command(verify)
cli.add_command(migrate)
cli.add_command(sources)
cli.add_command(forget)
cli.add_command(takeover)
cli.add_command(chunk_cmd)
cli.add_command(eval_cmd)
cli.add_command(export_model)
cli.add_command(mcp_cmd)
cli.add_command(ui_cmd)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: state files are created private (umask 077)."""
    from ingestd.daemon.statedir import private_umask

    private_umask()
    cli.main(args=list(argv) if argv is not None else None, prog_name="ingestd")
