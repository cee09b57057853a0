"""ingestd.store.embedding."""
