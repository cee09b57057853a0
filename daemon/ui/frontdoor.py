"""What ``ingestd ui`` reads and does, through the one front door every consumer uses.

:class:`FrontDoor` asks a :class:`~ingestd.daemon.client.Client` (the running daemon
through its control socket, else the state dir, as ``ingestd search`` and ``ingestd
mcp`` do) for status, searches and a document's chunks. Actions (sync a source now,
show and release held deletions) go through a client that never opens the state dir
(``local=False``): with no daemon they are refused, so the UI is read-only then. The
files page reads the manifest's documents with the SQLite view that ``ingestd status``
uses without a daemon (read-only: it never writes, never takes the state-dir lock).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestd.daemon.client import Client, NoDaemon
from ingestd.daemon.client.local import LocalState

if TYPE_CHECKING:
    from ingestd.daemon.config import Config, SourceConfig
    from ingestd.daemon.sources.filter import SourceFilter
    from ingestd.store.manifest.view import ManifestView

__all__ = ["READ_ONLY", "STATUS_MAX_AGE_S", "FrontDoor"]

#: Seconds a status answers pages before the next page reads a fresh one.
STATUS_MAX_AGE_S = 2.0


#: Why an action is refused with no daemon (the UI is read-only then).
READ_ONLY = "no daemon runs: the UI is read-only; start `ingestd run` to act"


class FrontDoor:
    """The index as the UI sees it.

    Args:
        state_dir: the state dir (resolved as the CLI does when ``None``).
        config: a config file: its sources' include/exclude globs explain what a
            folder leaves out (default: the running daemon's config file).
        socket: the daemon's control socket, for a daemon whose state dir cannot be
            read.
    """

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        config: Path | None = None,
        socket: Path | None = None,
    ) -> None:
        self.client = Client(state_dir, socket=socket, config=config)
        self.actions = Client(self.client.state_dir, socket=socket, config=config, local=False)
        self.state_dir = self.client.state_dir
        self.config_path = config
        self._state = LocalState(self.state_dir, config, "ingestd ui")
        self._status: tuple[float, dict[str, Any]] | None = None
        self._status_lock = threading.Lock()

    # -- reads --------------------------------------------------------------------------------

    def status(self, *, fresh: bool = False) -> dict[str, Any]:
        """``ingestd status --json``'s answer (``daemon`` is ``None`` without a daemon).

        A page never shows a status older than :data:`STATUS_MAX_AGE_S` seconds: the
        pages of one view (a page and its self-refresh, a burst of requests) share one
        reading, and the first request after that reads it again and waits for it (a
        status served while a fresh one was read in the background showed a daemon
        stopped minutes before, or none for one just started).

        Args:
            fresh: read it now (an action's page), whatever its age.
        """
        with self._status_lock:
            last = self._status
        if fresh or last is None or time.monotonic() - last[0] > STATUS_MAX_AGE_S:
            return self._read_status()
        return last[1]

    def _read_status(self) -> dict[str, Any]:
        st = self.client.status()
        with self._status_lock:
            self._status = (time.monotonic(), st)
        return st

    def search(self, query: str, **kw: Any) -> Any:
        """:meth:`Client.search <ingestd.daemon.client.Client.search>`'s answer."""
        return self.client.search(query, **kw)

    def chunks(self, source: str, path: str, version: str | None = None) -> dict[str, Any]:
        """A document's chunks as the index holds them (the ``chunks`` command)."""
        return self.client.chunks(source, path, version=version)

    @contextlib.contextmanager
    def manifest(self) -> Iterator[ManifestView | None]:
        """The state dir's SQLite manifest, read-only; ``None`` when there is none.

        Raises:
            ValueError: the manifest is on another database (``manifest.url``): the
                files page cannot list it.
        """
        from ingestd.store.manifest.view import ManifestView

        with self._state.manifest(self._config(None)) as m:
            if m is not None and not isinstance(m, ManifestView):
                raise ValueError(
                    "the files page lists a SQLite manifest only (manifest.url is set)"
                )
            yield m

    def source_filter(self, name: str, status: dict[str, Any]) -> SourceFilter | None:
        """The filter of source ``name`` as configured (the daemon's config by default)."""
        from ingestd.daemon.sources.filter import SourceFilter

        cfg = self._config(status)
        found: SourceConfig | None = None
        if cfg is not None:
            found = next((s for s in cfg.sources if s.name == name), None)
        if found is None:
            from ingestd.daemon.sources.local import LocalSourceConfig

            entry = next((s for s in status["sources"] if s["source"] == name), None)
            if entry is None or "refs" in entry:
                return None
            found = LocalSourceConfig(name=name, root=Path(entry["root"]))
        return SourceFilter(found, self.state_dir)

    def _config(self, status: dict[str, Any] | None) -> Config | None:
        from ingestd.daemon.config import ConfigError, load_config

        path = self.config_path
        if path is None and status is not None:
            daemon_config = (status.get("daemon") or {}).get("config")
            path = Path(daemon_config) if daemon_config else None
        if path is None:
            return None
        try:
            return load_config(path)
        except (ConfigError, OSError):
            return None

    # -- actions (a running daemon only) --------------------------------------------------------

    def sync(self, source: str) -> dict[str, Any]:
        """Sync ``source`` now (its files scanned, a git source fetched); the report.

        Raises:
            ingestd.daemon.wire.errors.NoDaemon: no daemon runs (:data:`READ_ONLY`).
        """
        return dict(self._act(lambda: self.actions.sync(sources=[source])))

    def held(self, source: str) -> list[str]:
        """The deletions the mass-deletion guard holds for ``source`` (a dry run).

        Raises:
            ingestd.daemon.wire.errors.NoDaemon: no daemon runs (:data:`READ_ONLY`).
        """
        got = self._act(lambda: self.actions.resync([source], dry_run=True))
        return [p for s in got["sources"] for p in s.get("held_deletes") or []]

    def release(self, source: str) -> dict[str, Any]:
        """Apply ``source``'s held deletions (``resync --allow-mass-delete``); the answer.

        Raises:
            ingestd.daemon.wire.errors.NoDaemon: no daemon runs (:data:`READ_ONLY`).
        """
        return dict(self._act(lambda: self.actions.resync([source], allow_mass_delete=True)))

    def _act(self, fn: Any) -> Any:
        try:
            return fn()
        except NoDaemon:
            raise NoDaemon(READ_ONLY) from None
