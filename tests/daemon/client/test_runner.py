"""The one front door: :class:`Runner` asks the daemon of a state dir, else runs here.

The CLI, ``Client`` and ``ingestd eval`` all run their commands with it, so these
pin its contract once: who answers, what happens to ``local()``, and the race where a
daemon takes the state dir between the question and the local run. A daemon here is
a :class:`ControlServer` in this process; "starting" is this process holding the lock
as ``ingestd run`` (the lock file names the holder).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.client import Client
from ingestd.daemon.client.runner import Runner
from ingestd.daemon.commands.query.search import search as search_cmd
from ingestd.daemon.service.control import ControlServer
from ingestd.daemon.wire.errors import DaemonError, NoDaemon
from ingestd.daemon.wire.statelock import StateLock, StateLockedError
from tests.helpers import fake_vectors, make_engine, sync_once


class Local:
    """A ``local()`` that counts its calls and answers ``"here"``."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return "here"


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Callable[[Callable[[str, dict[str, Any]], Any]], None]]:
    """Start a control server on ``tmp_path / "state"`` answering with a given dispatch."""
    servers: list[ControlServer] = []

    def start(dispatch: Callable[[str, dict[str, Any]], Any]) -> None:
        server = ControlServer(tmp_path / "state", dispatch)
        server.start()
        servers.append(server)

    yield start
    for s in servers:
        s.close()


def test_without_a_daemon_the_command_runs_here(tmp_path: Path) -> None:
    local = Local()
    assert Runner(tmp_path / "state").run("search", {}, local) == ("here", False)
    assert local.calls == 1


def test_a_running_daemon_answers_and_nothing_runs_here(tmp_path: Path, serving: Any) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    serving(lambda cmd, args: seen.append((cmd, args)) or {"answer": args["q"]})
    local = Local()
    runner = Runner(tmp_path / "state")
    assert runner.run("search", {"q": 1}, local) == ({"answer": 1}, True)
    assert runner.call("search", {"q": 2}, local) == {"answer": 2}
    assert local.calls == 0 and seen == [("search", {"q": 1}), ("search", {"q": 2})]


def test_the_daemons_error_keeps_its_message_and_exit_code(tmp_path: Path, serving: Any) -> None:
    def refuse(cmd: str, args: dict[str, Any]) -> Any:
        raise DaemonError("unknown source: nope; known sources: docs", 2)

    serving(refuse)
    local = Local()
    with pytest.raises(DaemonError, match="unknown source: nope") as err:
        Runner(tmp_path / "state").run("search", {}, local)
    assert err.value.exit_code == 2 and local.calls == 0


def test_a_socket_nobody_answers_on_is_an_error_not_a_local_run(tmp_path: Path) -> None:
    sock = tmp_path / "nobody.sock"
    local = Local()
    runner = Runner(tmp_path / "state", socket=sock)
    assert not runner.local
    with pytest.raises(NoDaemon, match=f"^no ingestd daemon answers on {sock}$"):
        runner.run("search", {}, local)
    with pytest.raises(NoDaemon, match="no ingestd daemon answers on"):
        runner.read("status", {}, local)
    assert local.calls == 0


def test_without_local_runs_no_daemon_is_an_error_but_a_read_is_answered(tmp_path: Path) -> None:
    local = Local()
    runner = Runner(tmp_path / "state", local=False)
    with pytest.raises(NoDaemon, match="no ingestd daemon runs for"):
        runner.run("search", {}, local)
    assert local.calls == 0
    assert runner.read("status", {}, local) == "here"  # status reads, it takes no lock


def test_a_state_dir_held_by_another_command_is_reported(tmp_path: Path) -> None:
    state = tmp_path / "state"
    lock = StateLock(state)
    lock.acquire("ingestd resync")
    try:

        def local() -> Any:
            StateLock(state).acquire("ingestd search")

        with pytest.raises(StateLockedError, match=r"in use .*\(pid \d+ \(ingestd resync\)\)"):
            Runner(state).run("search", {}, local)
    finally:
        lock.release()


def test_a_daemon_that_took_the_state_dir_meanwhile_is_asked(tmp_path: Path, serving: Any) -> None:
    state = tmp_path / "state"
    daemon_lock = StateLock(state)

    def local() -> Any:  # the daemon started after the runner found no socket
        daemon_lock.acquire("ingestd run")
        serving(lambda cmd, args: "from the daemon")
        StateLock(state).acquire("ingestd search")

    try:
        assert Runner(state).run("search", {}, local) == ("from the daemon", True)
    finally:
        daemon_lock.release()


def test_a_daemon_that_took_the_state_dir_and_stopped_before_serving_is_named(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    daemon_lock = StateLock(state)
    waits: list[int] = []

    def local() -> Any:
        daemon_lock.acquire("ingestd run")
        StateLock(state).acquire("ingestd search")

    def on_wait(pid: int) -> None:  # the runner waits for it: it stops instead
        waits.append(pid)
        daemon_lock.release()

    with pytest.raises(NoDaemon, match=f"state dir {state} is in use by another ingestd"):
        Runner(state, on_wait=on_wait).run("search", {}, local)
    assert len(waits) == 1


def test_through_a_daemon_and_here_the_answer_is_the_same(
    tree: Path, tmp_path: Path, serving: Any
) -> None:
    state = tmp_path / "state"
    sync_once(tree, state)
    question = {"query": "collector pipeline exporters", "k": 5, "mode": "sparse"}
    here = Client(state).search(**question)
    assert here  # answered by an engine this process opened under the lock
    engine = make_engine(tree, state, fake_vectors)
    try:
        serving(lambda cmd, args: search_cmd(engine, **args))
        through = Client(state, local=False).search(**question)
    finally:
        engine.close()
    assert through == here
