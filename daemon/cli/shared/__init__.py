"""What the command modules of ``ingestd`` share: the plumbing beside the commands.

Owns the options every command takes and its ``--json`` output (``options``), what a
failure becomes (``errors``: one line on stderr and an exit code), how a command
reaches its state (``state``: the running daemon or the state dir itself) and the
progress bars of the long commands (``progress``). Holds no command: the modules
beside this package do, and they import from here, never the other way round.
"""
