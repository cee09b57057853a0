"""Watching source trees: a watcher per source, coalescing events, and watch coverage."""
