"""``python -m ingestd.daemon``: the ``ingestd`` command."""

from ingestd.daemon.entry import main

main()
