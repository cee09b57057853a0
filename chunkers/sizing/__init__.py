"""ingestd.chunkers.sizing."""
