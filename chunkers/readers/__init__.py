"""ingestd.chunkers.readers: a file's bytes -> the text every offset refers to, its coordinates."""
