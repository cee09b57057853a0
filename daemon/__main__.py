"""``python -m ingestd.daemon``: the ``ingestd`` command."""

from .cli import main

main()
