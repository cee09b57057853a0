"""The sync engine: plan a source's changes from the manifest, then apply them.

Scanning files, preparing documents (read, decode, chunk, ids), writing them in the
crash-safe order, healing drift between the manifest and the store, and verifying
against a from-scratch ingest. :class:`~ingestd.daemon.sync.engine.Engine` composes
the parts; everything here is an optimisation of "ingest everything from scratch"
that must not change its result.
"""
