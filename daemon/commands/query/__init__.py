"""The shared commands that read the index: ``search``, ``read`` and ``chunks``.

Owns answering a search (``search``) and checking its filters against the sources
(``search_filters``), reading a hit's neighbourhood or a document's lines (``read``,
with ``widen`` choosing the lines within a token budget and ``extracted`` keeping a
document's extracted text while its bytes are the same) and a document's chunks as
the store holds them (``chunks``). Writes neither the manifest nor the store.
"""
