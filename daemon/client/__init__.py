"""The index from Python code: a typed API for applications.

- :class:`Client` (:mod:`~ingestd.daemon.client.client`): ``search``, ``read``,
  ``sync``, ``status`` and ``resync`` through the running daemon's control socket, or
  on the state dir itself when no daemon runs; its answers are typed in
  :mod:`~ingestd.daemon.client.types`, its errors are one line
  (:mod:`~ingestd.daemon.client.errors`; every one is an
  :class:`~ingestd.chunkers.errors.IngestdError`, the tree is drawn in
  :mod:`ingestd.daemon.errors`).
- :class:`~ingestd.daemon.client.runner.Runner` (:mod:`~ingestd.daemon.client.runner`):
  "through the daemon, else here", which the ``Client``, the CLI and ``ingestd eval``
  share; :mod:`~ingestd.daemon.client.local` opens the state dir under its lock.
- :class:`QueryBuilder` (:mod:`~ingestd.daemon.client.query`): the query side alone,
  for applications that query Qdrant themselves: the dense and BM25 query vectors and
  the Query API request that reproduce ``ingestd search``.

Importing this package loads neither qdrant-client, pydantic nor torch: each method
imports what it needs.
"""

from ingestd.daemon.client.client import Client
from ingestd.daemon.client.errors import SyncTimeout
from ingestd.daemon.client.query import QueryBuilder
from ingestd.daemon.wire.errors import DaemonError, NoDaemon
from ingestd.daemon.wire.statelock import StateLockedError

__all__ = ["Client", "DaemonError", "NoDaemon", "QueryBuilder", "StateLockedError", "SyncTimeout"]
