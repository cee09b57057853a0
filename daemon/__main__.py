"""``python -m ingestd.daemon``: the ``ingestd`` command."""

from ingestd.daemon.cli.main import main

main()
