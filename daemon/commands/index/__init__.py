"""The shared commands that change or check the index: ``resync``, ``sync``, ``verify``...

... ``forget`` and ``migrate``. Owns reconciling the selected sources with their files
(``resync``, or its plan), the "sync, then answer" barrier (``sync``), comparing files,
manifest and store (``verify``), removing a source no longer configured (``forget``)
and reporting, starting or aborting collection migrations (``migrate``).
"""
