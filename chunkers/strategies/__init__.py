"""ingestd.chunkers.strategies."""
