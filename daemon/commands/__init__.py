"""The commands the CLI (without a daemon), the ``Client`` and the control socket share.

Each takes an :class:`~ingestd.daemon.engine.Engine` and JSON-ready arguments and
returns JSON-ready results, so a command gives the same answer whether the caller opens
the store itself or asks the running daemon. One module per command, grouped by what it
does to the index: :mod:`~ingestd.daemon.commands.query` reads it (``search``, ``read``,
``chunks``), :mod:`~ingestd.daemon.commands.index` changes or checks it (``resync``,
``sync``, ``verify``, ``forget``, ``migrate``). Beside them: ``status`` (and
``status_text``, its JSON as text for a person, the CLI's and the UI's), ``evaluate``
(``eval`` in the daemon), ``selection`` (the source check every command shares) and
:mod:`~ingestd.daemon.commands.routes`, the one table that routes them through the
control socket: a command the daemon answers is registered there, and nowhere else.
"""

__all__: list[str] = []
