"""The command line: ``ingestd`` and its subcommands (click)."""

from ingestd.daemon.cli.main import cli, main

__all__ = ["cli", "main"]
