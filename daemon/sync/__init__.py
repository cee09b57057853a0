"""The sync engine: plan a source's changes from the manifest, then apply them.

Scanning files, preparing documents (read, decode, chunk, ids), writing them in the
crash-safe order, healing drift between the manifest and the store, and verifying
against a from-scratch ingest. :class:`~ingestd.daemon.engine.Engine`, above this
package and :mod:`~ingestd.daemon.migration`, composes the parts; everything here is
an optimisation of "ingest everything from scratch" that must not change its result.

One subpackage per step of the write path, each saying what it owns: ``planning``,
``preparing``, ``writing``; the state the engine owns (``state``), checks and repairs
(``healing``) and the profiles that decide a collection's points (``profiles``). The
context the parts share and the data they pass stay here.
"""
