"""How a client reaches the daemon of a state dir: the control socket's protocol and the lock.

Shared by the server (:mod:`ingestd.daemon.service.control`) and its clients (the
runner of :mod:`ingestd.daemon.client`, which the CLI, the ``Client`` and ``ingestd
eval`` use):

- :mod:`~ingestd.daemon.wire.protocol`: one JSON request line, one JSON response line;
  :func:`~ingestd.daemon.wire.protocol.request` and its errors
  (:class:`~ingestd.daemon.wire.protocol.DaemonError`,
  :class:`~ingestd.daemon.wire.protocol.NoDaemon`);
- :mod:`~ingestd.daemon.wire.location`: where the socket of a state dir is;
- :mod:`~ingestd.daemon.wire.statelock`: the state-dir lock, which names its holder, so
  a client tells a daemon that is starting from another process that holds the state.

These modules import the standard library only.
"""

__all__: list[str] = []
