"""The index from an application: :class:`Client`.

A :class:`Client` asks the running daemon of a state dir through its control socket,
exactly as the CLI does: both run their commands with the same
:class:`~ingestd.daemon.client.runner.Runner` (the same commands, the same answers:
``search`` returns the ranking ``ingestd search`` prints). When no daemon runs, it opens
the state dir itself for each call (:class:`~ingestd.daemon.client.local.LocalState`),
unless told not to.

Example::

    from ingestd.daemon.client import Client

    with Client("/var/lib/ingestd") as index:
        index.sync(["docs/install.md"])          # the edit just saved is searchable now
        for hit in index.search("how do I configure the exporter", k=3):
            print(hit["path"], hit["start_line"], hit["score"])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from ingestd.daemon.client.errors import SyncTimeout
from ingestd.daemon.client.local import LocalState
from ingestd.daemon.client.runner import START_WAIT_S, Runner
from ingestd.daemon.client.types import Answer, ReadResult, SyncReport
from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine

__all__ = ["Client"]


class Client:
    """Search, read, sync and watch an ingestd index (see the module docstring).

    Args:
        state_dir: the state dir; default as the CLI's (``$INGESTD_STATE_DIR``, the
            config's ``state_dir``, ``$STATE_DIRECTORY``, ``~/.local/state/ingestd``).
        socket: the daemon's control socket, for a daemon whose state dir you cannot
            read (``/run/ingestd/ingestd.sock`` under systemd); then only that daemon
            is asked, and none answering is an error.
        config: a config file: its ``state_dir``, and its sources and ``search``
            settings when no daemon runs.
        local: with no daemon running, open the state dir in this process (holding
            its lock during each call); ``False``: raise
            :class:`~ingestd.daemon.wire.errors.NoDaemon` instead.
        start_wait_s: seconds to wait for a daemon that is starting.

    Every method raises :class:`~ingestd.daemon.wire.errors.DaemonError` for a
    known failure (its ``exit_code`` is the CLI's: 2 for bad arguments), with the
    one-line message the CLI prints; and
    :class:`~ingestd.daemon.wire.statelock.StateLockedError` when another process
    (not a daemon) holds the state dir.

    Raises:
        ingestd.daemon.config.ConfigError: ``config`` is invalid.
    """

    def __init__(
        self,
        state_dir: str | Path | None = None,
        *,
        socket: str | Path | None = None,
        config: str | Path | None = None,
        local: bool = True,
        start_wait_s: float = START_WAIT_S,
    ) -> None:
        from ingestd.daemon.statedir import resolve_state_dir

        cfg = None
        if config is not None and state_dir is None:
            from ingestd.daemon.config import load_config

            cfg = load_config(config)  # its state_dir (a missing root is no error)
        self.state_dir = resolve_state_dir(state_dir, cfg)
        self.socket = Path(socket) if socket is not None else None
        self.local = local and self.socket is None
        self.start_wait_s = start_wait_s
        self._runner = Runner(
            self.state_dir, socket=self.socket, local=self.local, start_wait_s=start_wait_s
        )
        self._state = LocalState(
            self.state_dir, Path(config) if config is not None else None, "ingestd client"
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Nothing stays open between calls; kept for ``with`` and symmetry."""

    # -- how a call is answered -------------------------------------------------------------------

    def _call(
        self,
        cmd: str,
        args: dict[str, Any],
        local: Callable[[Engine], Any],
        *,
        timeout: float | None = None,
        read_only: bool = False,
    ) -> Any:
        """``cmd`` through the daemon, else ``local(engine)`` on the state dir.

        ``read_only``: ``local`` only reads (the readers' lock, see ``LocalState.run``).
        """
        return self._run(cmd, args, local, timeout=timeout, read_only=read_only)[0]

    def _run(
        self,
        cmd: str,
        args: dict[str, Any],
        local: Callable[[Engine], Any],
        *,
        timeout: float | None = None,
        read_only: bool = False,
    ) -> tuple[Any, bool]:
        """:meth:`_call`'s answer, and whether the daemon gave it."""
        return self._runner.run(
            cmd,
            args,
            lambda: self._state.run(local, stop_after=timeout, read_only=read_only),
            timeout=timeout,
        )

    def interrupt(self) -> None:
        """Ask a call running on the state dir in this process to stop at its next checkpoint.

        A ``sync`` then raises :class:`SyncTimeout`; a daemon's work is not affected.
        Thread-safe (another thread's call is interrupted).
        """
        self._state.interrupt()

    # -- the commands -------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        source: str | None = None,
        path: str | None = None,
        mode: str | None = None,
        expand: bool = False,
        ranks: bool = True,
        budget_tokens: int | None = None,
        per_page: int | None = None,
        version: str | None = None,
    ) -> Answer:
        """The chunks that best answer ``query``, best first: ``ingestd search``'s ranking.

        Args:
            query: the question, in words or identifiers (cut to the model's window,
                with a note, when longer).
            k: number of hits; with ``budget_tokens``, the most passages.
            source: only this source (its name).
            path: only this file, or the files under this folder (relative to a
                source's root; an absolute path under a root is turned into one, any
                other is an error).
            mode: ``hybrid``, ``dense`` or ``sparse`` (default: the config's
                ``search.mode``); ``sparse`` needs no embedding model.
            expand: add each hit's parent section (``hierarchical`` rules).
            ranks: each hit's rank and score in the dense and the sparse ranking
                (``dense_rank``, ``dense_score``, ``sparse_rank``, ``sparse_score``),
                as ``ingestd search --json`` prints them; ``null`` past a ranking's
                ``search.candidates``, and the dense ones in ``sparse`` mode. In
                ``dense`` and ``sparse`` mode they cost the other ranking's query;
                ``False`` leaves the four keys out.
            budget_tokens: return passages instead of hits: the best hits, those of
                one document that overlap or touch merged, until this many tokens
                (cl100k_base by default) are filled.
            per_page: with ``budget_tokens``, most passages of one document.
            version: only this version of a versioned source (a git branch or tag
                name, as hits' ``version`` gives it).

        Returns:
            The hits (or passages), a list with the answer's ``mode``, ``notes``,
            ``indexing`` and ``hits`` as attributes (:class:`Answer`).
        """
        from ingestd.daemon.commands.query.search import answer_request
        from ingestd.store.search.query import Filters
        from ingestd.store.search.request import SearchRequest

        if not query.strip():
            raise _usage("the query is empty")
        request = SearchRequest(
            query,
            k,
            mode,  # type: ignore[arg-type]  # checked where it is answered
            Filters(source=source, path=path, version=version),
            expand=expand,
            ranks=ranks,
            budget_tokens=budget_tokens,
            per_page=per_page,
        )
        got = self._call(
            "search", request.wire(), lambda e: answer_request(e, request), read_only=True
        )
        return Answer(_as_answer(got))

    def read(
        self,
        id: str | None = None,
        *,
        path: str | None = None,
        source: str | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
        context: int = 1,
        max_lines: int = 200,
        budget_tokens: int | None = None,
        version: str | None = None,
    ) -> ReadResult:
        """A hit widened to its section and neighbours, or lines of an indexed document.

        With ``budget_tokens``, the lines fit that many tokens (cl100k_base by
        default): the hit is widened to its section first, then past it. See
        :func:`ingestd.daemon.commands.query.read.read` for the arguments and the answer.
        """
        from ingestd.daemon.commands.query import read

        args: dict[str, Any] = {
            "id": id,
            "source": source,
            "path": path,
            "start_line": start_line,
            "end_line": end_line,
            "context": context,
            "max_lines": max_lines,
        }
        if budget_tokens is not None:
            args["budget_tokens"] = budget_tokens
        if version is not None:
            args["version"] = version
        got = self._call("read", args, lambda e: read.read(e, **args), read_only=True)
        return cast(ReadResult, got)

    def chunks(self, source: str, path: str, *, version: str | None = None) -> dict[str, Any]:
        """The chunks of an indexed document as the index holds them (``ingestd ui``'s view).

        See :func:`ingestd.daemon.commands.query.chunks.chunks` for the answer: per chunk its
        id, rule, chunker, tokens, lines, heading path and the format's own citation.

        Raises:
            DaemonError: an unknown source (exit code 2), a document not in the index.
        """
        from ingestd.daemon.commands.query.chunks import chunks

        args: dict[str, Any] = {"source": source, "path": path, "version": version}
        return cast(dict[str, Any], self._call("chunks", args, lambda e: chunks(e, **args)))

    def sync(
        self,
        paths: Sequence[str] | None = None,
        *,
        sources: Sequence[str] | None = None,
        timeout_s: float | None = None,
    ) -> SyncReport:
        """Make the index current, then return: every change on disk before the call is searchable.

        Args:
            paths: only these files or folders (absolute, or relative to a source's
                root as hits give them); default: every source, scanned.
            sources: only these sources.
            timeout_s: give up waiting after this many seconds (a daemon goes on with
                the sync; without a daemon it stops at its next checkpoint).

        Returns:
            What was done per source, ``complete`` (everything is searchable, else
            ``summary`` says why not), ``seconds`` (see
            :func:`ingestd.daemon.commands.index.sync.sync`) and ``through_daemon``.

        Raises:
            SyncTimeout: not done within ``timeout_s`` seconds.
        """
        from ingestd.daemon.commands.index import sync

        args: dict[str, Any] = {
            "paths": list(paths) if paths else None,
            "sources": list(sources or []) or None,
        }
        try:
            report, by_daemon = self._run(
                "sync", args, lambda e: sync.sync(e, **args), timeout=timeout_s
            )
        except TimeoutError:
            raise _timeout(timeout_s) from None
        if any(s.get("interrupted") for s in report["sources"]):
            raise _timeout(timeout_s)
        return cast(SyncReport, {**report, "through_daemon": by_daemon})

    def resync(
        self,
        sources: Sequence[str] | None = None,
        *,
        full: bool = False,
        dry_run: bool = False,
        allow_mass_delete: bool = False,
    ) -> dict[str, Any]:
        """``ingestd resync`` of the known sources (or ``sources``); its ``--json`` answer.

        ``exit_code`` in the answer is the CLI's: 0 in sync, 3 deletions held, 1 files
        left to retry.
        """
        from ingestd.daemon.commands.index.resync import resync as resync_cmd

        args: dict[str, Any] = {
            "sources": list(sources) if sources else None,
            "full": full,
            "dry_run": dry_run,
            "allow_mass_delete": allow_mass_delete,
        }
        return cast(dict[str, Any], self._call("resync", args, lambda e: resync_cmd(e, **args)))

    def status(self) -> dict[str, Any]:
        """``ingestd status --json``'s answer: per source counts and sync times; ``daemon``.

        ``daemon`` is ``None`` when no daemon runs (the manifest is read, no lock
        taken); else its health, phase, queue and lag.
        """
        return cast(dict[str, Any], self._runner.read("status", {}, self._local_status))

    def _local_status(self) -> dict[str, Any]:
        """``status`` without a daemon: the manifest is read, no lock is taken."""
        from ingestd.daemon.commands.status import local_status, manifest_lost

        cfg = self._state.config() if self._state.config_path is not None else None
        configured = [s.name for s in cfg.sources] if cfg is not None else None
        with self._state.manifest(cfg) as m:
            st = local_status(m, self.state_dir, configured)
            lost = manifest_lost(m, self.state_dir, cfg)
        if lost is not None:
            st["manifest_lost"] = lost
        return st


def _as_answer(got: Any) -> dict[str, Any]:
    """The search answer; a daemon of an earlier version answers with the hits alone."""
    if isinstance(got, list):
        return {"hits": got, "mode": got[0].get("mode", "") if got else ""}
    return cast(dict[str, Any], got)


def _usage(message: str) -> DaemonError:
    return DaemonError(message, 2)


def _timeout(seconds: float | None) -> SyncTimeout:
    return SyncTimeout(
        f"sync did not finish within {seconds:g} s (a running daemon goes on with it): "
        "call sync again, or see status"
    )
