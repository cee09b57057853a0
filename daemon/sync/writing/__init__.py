"""Writing prepared documents to the store in the crash-safe order.

Owns the write path after preparing: a plan applied in groups (``applier``), documents
embedded and written in bounded slices with checkpoints (``writer``, its records and
shared helpers in ``write_parts``), long documents written in the background
(``long_writes``), and the documents of a versioned source whose versions share points
(``shared_writes``).
"""
