"""The commands the CLI (without a daemon), the ``Client`` and the control socket share.

Each takes an :class:`~ingestd.daemon.sync.engine.Engine` and JSON-ready arguments and
returns JSON-ready results, so a command gives the same answer whether the caller opens
the store itself or asks the running daemon. One module per command: ``search``,
``read`` (widen a hit), ``sync`` (the "sync, then answer" barrier), ``resync``,
``verify``, ``forget``, ``migrate``, ``status`` and ``evaluate`` (``eval`` in the
daemon); ``selection`` is the source check they share. :mod:`~ingestd.daemon.commands.routes`
is the one table that routes them through the control socket: a command the daemon
answers is registered there, and nowhere else.
"""

__all__: list[str] = []
