"""ingestd.store.manifest.manifest."""
