"""Planning a sync: which files of a source changed since the manifest recorded them.

Owns the comparison of a source's files with the manifest (``planner``: the
:class:`~ingestd.daemon.sync.types.Plan` of documents to write, delete or restat) and
the documents reached by more than one hard link (``links``). Reads, never writes.
"""
