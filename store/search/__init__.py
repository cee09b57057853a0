"""ingestd.store.search.query."""
