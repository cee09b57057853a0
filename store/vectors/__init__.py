"""ingestd.store.vectors.base."""
