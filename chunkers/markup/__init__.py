"""ingestd.chunkers.markup.noise."""
