"""``ingestd run``: the service's lifecycle, job queue, control socket, systemd and metrics."""
