"""Checks and repairs: the store and the manifest brought back into agreement.

Owns the checks run before every scan and their repairs (``repair``), whether the
store still holds what the manifest records (``holdings``), ``ingestd verify``
(``verify``), and stores written before versions shared points (``version_keys``).
"""
