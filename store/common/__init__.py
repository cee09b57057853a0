"""ingestd.store.common."""
