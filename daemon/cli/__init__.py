"""The command line: ``ingestd`` and its subcommands (click).

:mod:`~ingestd.daemon.cli.main` assembles the ``cli`` group and holds the entry point;
the commands live by what they do:

- :mod:`~ingestd.daemon.cli.serve`: ``run``, the daemon itself;
- :mod:`~ingestd.daemon.cli.index`: ``resync``, ``verify``, ``forget``, ``sources``;
- :mod:`~ingestd.daemon.cli.query`: ``search``, ``status``;
- :mod:`~ingestd.daemon.cli.embedding`: ``migrate``, ``export-model``;
- :mod:`~ingestd.daemon.cli.tuning`: ``chunk``, ``eval`` (where a run goes and its
  progress display: :mod:`~ingestd.daemon.cli.eval_client`);
- :mod:`~ingestd.daemon.cli.consumers`: ``mcp``, the index served to agents.

What they share is :mod:`~ingestd.daemon.cli.shared`:
:mod:`~ingestd.daemon.cli.shared.options` (options, ``--json`` output),
:mod:`~ingestd.daemon.cli.shared.errors` (known failures, exit codes),
:mod:`~ingestd.daemon.cli.shared.state` (the running daemon or the state dir) and
:mod:`~ingestd.daemon.cli.shared.progress` (progress bars). The output helper of one
command stays beside it: :mod:`~ingestd.daemon.cli.preview` (``chunk``); ``status`` as
text is :mod:`~ingestd.daemon.commands.status_text`, beside the status JSON it renders
(``ingestd ui`` shows it too).

A new command goes in the module of its kind, as a ``@click.command()`` with
``@common_options`` and ``@handle_errors``, importing anything beyond click and the
standard library inside its function (start-up time); ``main`` registers it, and
docs/reference/commands.md names it (``tests/daemon/cli/test_cli.py`` checks).
"""

from ingestd.daemon.cli.main import cli, main

__all__ = ["cli", "main"]
