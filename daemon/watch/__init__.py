"""Watching source trees: the watchdog bridge, coalescing events, and watch coverage."""
