"""The command line: ``ingestd`` and its subcommands (click).

:mod:`~ingestd.daemon.cli.main` assembles the ``cli`` group and holds the entry point;
the commands live by what they do:

- :mod:`~ingestd.daemon.cli.serve`: ``run``, the daemon itself;
- :mod:`~ingestd.daemon.cli.index`: ``resync``, ``verify``, ``forget``, ``sources``;
- :mod:`~ingestd.daemon.cli.query`: ``search``, ``status``;
- :mod:`~ingestd.daemon.cli.embedding`: ``migrate``, ``export-model``;
- :mod:`~ingestd.daemon.cli.tuning`: ``chunk``, ``eval``;
- :mod:`~ingestd.daemon.cli.consumers`: ``mcp``, the index served to agents.

What they share: :mod:`~ingestd.daemon.cli.options` (options, ``--json`` output),
:mod:`~ingestd.daemon.cli.errors` (known failures, exit codes) and
:mod:`~ingestd.daemon.cli.state` (the running daemon or the state dir). Their output
helpers: :mod:`~ingestd.daemon.cli.status_text`, :mod:`~ingestd.daemon.cli.progress`,
:mod:`~ingestd.daemon.cli.preview`.

A new command goes in the module of its kind, as a ``@click.command()`` with
``@common_options`` and ``@handle_errors``, importing anything beyond click and the
standard library inside its function (start-up time); ``main`` registers it, and
docs/reference/commands.md names it (``tests/daemon/cli/test_cli.py`` checks).
"""

from ingestd.daemon.cli.main import cli, main

__all__ = ["cli", "main"]
