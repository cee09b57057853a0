"""``ingestd run``: lifecycle, job queue, sync policy, watches, status, control, metrics."""
