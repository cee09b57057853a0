"""The ``edge`` engine: Qdrant Edge in-process, its spec and its store.

Owns the spec (``edge_engine``), the store (``edge``) over its shards (``edge_shards``),
the guard that turns the engine's panics into errors (``edge_guard``), the healing of a
store a crash left half-written (``edge_heal``) and what its write-ahead log says
(``edge_wal``).
"""
