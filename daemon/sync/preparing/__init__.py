"""Preparing documents: from a file's bytes to chunks and payloads, before any write.

Owns what decides a document's chunks: the per-path chunking rules (``rules``), one
document read, chunked and hashed (``documents``), secrets kept out (``secret_files``),
text that is not prose (``nonprose``), and the preparer that runs them per source,
big files off-thread (``preparer``). No store, no model.
"""
