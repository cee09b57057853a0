"""``ingestd eval``: score chunking rules and search modes on questions about a corpus."""
