"""Through the daemon, else here: how every consumer runs a command on a state dir.

The CLI, the :class:`~ingestd.daemon.client.Client` (and so ``ingestd mcp``) and
``ingestd eval`` run their commands with one :class:`Runner`:

1. The daemon of the state dir is asked through its control socket
   (:mod:`ingestd.daemon.wire`). A daemon that is starting (it holds the state-dir lock,
   its socket does not serve yet) is waited for, up to ``start_wait_s`` seconds, and
   ``on_wait`` is told once (the CLI prints a one-line note on a terminal).
2. With no daemon, the command runs here: ``local()``, which opens the state dir under
   its lock (:func:`~ingestd.daemon.client.local.locked_engine`: take the lock naming
   the holder, open an engine, run, close it, release the lock).
3. When a daemon took the lock in between (``local()`` raised
   :class:`~ingestd.daemon.wire.statelock.StateLockedError` and the holder is an
   ``ingestd run`` that is starting), it is asked after all, once it serves.

With ``socket``, only the daemon on that socket is asked, and none answering is
:class:`~ingestd.daemon.wire.errors.NoDaemon`; with ``local=False`` the state dir is
never opened here either. Answers are the same either way: the daemon and the local
path run the same command functions (:data:`~ingestd.daemon.commands.routes.ROUTES`).

This module imports the standard library and :mod:`ingestd.daemon.wire` only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ingestd.daemon.wire.errors import NoDaemon
from ingestd.daemon.wire.protocol import request, request_when_ready
from ingestd.daemon.wire.statelock import StateLockedError, starting_daemon

__all__ = ["START_WAIT_S", "Runner"]

T = TypeVar("T")

#: Seconds a command waits for the socket of an ``ingestd run`` that is starting.
START_WAIT_S = 60.0


class Runner:
    """Runs control commands through the daemon of ``state_dir``, else in this process.

    Args:
        state_dir: the state dir (its ``control-socket`` pointer finds the daemon).
        socket: the daemon's control socket, for a daemon whose state dir cannot be
            read; then only that daemon is asked, and none answering is an error.
        local: with no daemon, run commands here; ``False``: raise
            :class:`~ingestd.daemon.wire.errors.NoDaemon` instead. Always ``False``
            with ``socket``.
        start_wait_s: seconds to wait for a daemon that is starting.
        on_wait: called with the pid of a starting daemon when the wait for it begins.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        socket: Path | None = None,
        local: bool = True,
        start_wait_s: float = START_WAIT_S,
        on_wait: Callable[[int], None] | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.socket = Path(socket) if socket is not None else None
        self.local = local and self.socket is None
        self.start_wait_s = start_wait_s
        self.on_wait = on_wait

    def request(
        self, cmd: str, args: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        """One request to the daemon, without waiting for one that is starting (a poll).

        Args:
            cmd: the control command.
            args: its JSON arguments.
            timeout: seconds to wait for the answer (``None``: no limit).

        Raises:
            ingestd.daemon.wire.errors.NoDaemon: no daemon listens.
            ingestd.daemon.wire.errors.DaemonError: the daemon reported an error.
            TimeoutError: no answer within ``timeout`` seconds.
        """
        return request(self.state_dir, cmd, args, timeout, socket_path=self.socket)

    def ask(
        self, cmd: str, args: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        """The daemon's answer to ``cmd``; a daemon that is starting is waited for.

        Args:
            cmd: the control command.
            args: its JSON arguments.
            timeout: seconds to wait for the answer once sent (``None``: no limit); the
                daemon goes on with the command when it passes.

        Raises:
            ingestd.daemon.wire.errors.NoDaemon: no daemon runs; with ``socket``, the
                message names the socket.
            ingestd.daemon.wire.errors.DaemonError: the daemon reported an error, or a
                starting daemon did not serve within ``start_wait_s`` seconds.
            TimeoutError: no answer within ``timeout`` seconds.
        """
        try:
            return request_when_ready(
                self.state_dir,
                cmd,
                args,
                socket_path=self.socket,
                wait=self.start_wait_s,
                on_wait=self.on_wait,
                timeout=timeout,
            )
        except NoDaemon:
            if self.socket is not None:
                raise NoDaemon(f"no ingestd daemon answers on {self.socket}") from None
            raise

    def run(
        self,
        cmd: str,
        args: dict[str, Any],
        local: Callable[[], T],
        *,
        timeout: float | None = None,
    ) -> tuple[Any, bool]:
        """``cmd`` through the daemon, else ``local()`` here (see the module docstring).

        Args:
            cmd: the control command.
            args: its JSON arguments.
            local: runs the command without a daemon; it opens the state dir under its
                lock.
            timeout: seconds to wait for the daemon's answer (``None``: no limit).

        Returns:
            The answer, and whether the daemon gave it.

        Raises:
            ingestd.daemon.wire.errors.NoDaemon: no daemon runs and this runner may not
                run commands here (``socket``, ``local=False``), or a daemon that took the
                state dir meanwhile stopped before it served.
            ingestd.daemon.wire.statelock.StateLockedError: another process (not a
                starting daemon) holds the state dir.
            ingestd.daemon.wire.errors.DaemonError: the daemon reported an error.
        """
        try:
            return self.ask(cmd, args, timeout=timeout), True
        except NoDaemon:
            if self.socket is not None:
                raise
            if not self.local:
                raise NoDaemon(f"no ingestd daemon runs for {self.state_dir}") from None
        try:
            return local(), False
        except StateLockedError:
            if starting_daemon(self.state_dir) is None:
                raise
        # a daemon took the state dir after we looked: it answers once it serves
        try:
            return self.ask(cmd, args, timeout=timeout), True
        except NoDaemon:
            raise NoDaemon(
                f"state dir {self.state_dir} is in use by another ingestd process; "
                "stop it or use another --state-dir"
            ) from None

    def call(
        self,
        cmd: str,
        args: dict[str, Any],
        local: Callable[[], T],
        *,
        timeout: float | None = None,
    ) -> Any:
        """:meth:`run`'s answer alone.

        Raises:
            See :meth:`run`.
        """
        return self.run(cmd, args, local, timeout=timeout)[0]

    def read(self, cmd: str, args: dict[str, Any], here: Callable[[], T]) -> Any:
        """The daemon's answer to ``cmd``, else ``here()``: a read that takes no lock.

        ``status`` without a daemon reads the manifest only, so it is answered here
        even with ``local=False`` (not with ``socket``).

        Raises:
            ingestd.daemon.wire.errors.NoDaemon: nobody answers on ``socket``.
            ingestd.daemon.wire.errors.DaemonError: the daemon reported an error.
        """
        try:
            return self.ask(cmd, args)
        except NoDaemon:
            if self.socket is not None:
                raise
        return here()
