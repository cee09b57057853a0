"""The service side: config, rules, scanner, watcher, sync engine, CLI, control API."""
