"""Collection versions: layout upgrades and model migrations behind an alias.

A new version of a collection is built beside the current one and switched to
atomically; searches and changes keep using the current version until then. The sync
engine reaches this package through
:class:`~ingestd.daemon.migration.lifecycle.Collections`.
"""
