"""The query side of the store: one search request, asked of any engine.

* :mod:`~ingestd.store.search.request`: the one search request record every edge builds;
* :mod:`~ingestd.store.search.query`: the filters (:class:`~ingestd.store.search.query.Filters`,
  with the one translator to conditions) and the dense, sparse and hybrid rankings;
* :mod:`~ingestd.store.search.conditions`: the engine-neutral filter conditions;
* :mod:`~ingestd.store.search.sparse`: BM25 sparse vectors;
* :mod:`~ingestd.store.search.fusion`: fusion of rankings (RRF over the union of candidates);
* :mod:`~ingestd.store.search.pages`, :mod:`~ingestd.store.search.passages` and
  :mod:`~ingestd.store.search.citation`: hits turned into pages, passages under a token
  budget, and citations.

A new filter is a field of ``Filters`` and, when its payload key or match is not the
field's own, one entry of its translator (``docs/development.md``, "Where a change goes").
"""
