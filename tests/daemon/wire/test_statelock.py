"""The state-dir locks: one writer; readers share, write nothing and never keep a writer out.

Before, every process that opened the state dir took one exclusive lock, so an
``ingestd status`` poll that happened to hold it made ``ingestd run`` exit at once
("in use by another ingestd process"). Now readers share the lock, a writer waits for
them (bounded, saying so), and no new reader comes in while a writer waits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ingestd.daemon.wire.statelock import (
    LOCK_FILE,
    QUEUE_FILE,
    READER_FILE,
    ReadLock,
    StateLock,
    StateLockedError,
    lock_holder,
    lock_readers,
    starting_daemon,
)
from tests.helpers import wait_for


def _state(tmp_path: Path) -> Path:
    """A state dir whose lock files a writer made (and left)."""
    state = tmp_path / "state"
    lock = StateLock(state)
    lock.acquire("ingestd resync")
    lock.release()
    return state


def _files(state: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in state.iterdir()}


def test_a_writer_makes_the_lock_files_and_names_itself_while_it_holds_the_lock(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    lock = StateLock(state)
    lock.acquire("ingestd run")
    try:
        assert {LOCK_FILE, QUEUE_FILE, READER_FILE} <= {p.name for p in state.iterdir()}
        assert (state / LOCK_FILE).read_text() == f"pid {os.getpid()} (ingestd run)"
        assert starting_daemon(state) == os.getpid()
    finally:
        lock.release()
    assert (state / LOCK_FILE).read_text() == "" and lock_holder(state) is None


def test_readers_share_the_state_dir_and_write_nothing(tmp_path: Path) -> None:
    state = _state(tmp_path)
    before = _files(state)
    with ReadLock(state), ReadLock(state):
        assert [pid for pid, _ in lock_readers(state)] == [os.getpid()]
    assert _files(state) == before


def test_a_reader_of_a_state_dir_without_lock_files_creates_none(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with ReadLock(state, store=True) as lock:
        assert not lock.held
    assert list(state.iterdir()) == []


def test_a_writer_waits_for_a_reader_saying_so_then_takes_the_lock(tmp_path: Path) -> None:
    state = _state(tmp_path)
    reader = ReadLock(state)
    reader.acquire()
    said: list[str] = []
    took: list[bool] = []
    writer = StateLock(state)
    t = threading.Thread(
        target=lambda: took.append(
            writer.acquire("ingestd run", wait_s=60, on_wait=said.append) is None
        )
    )
    t.start()
    try:
        wait_for(lambda: said, 30, "the writer to say it waits")
        assert "waiting up to 60 s for 1 reader (pid" in said[0], said
        assert not took  # still waiting
        # meanwhile no new reader comes in, and it is told who waits
        with pytest.raises(StateLockedError, match=r"\(ingestd run\)"):
            ReadLock(state).acquire()
        assert starting_daemon(state) == os.getpid()
    finally:
        reader.release()
        t.join(30)
    try:
        assert took == [True] and writer.held
    finally:
        writer.release()


def test_readers_that_stay_past_the_wait_fail_the_writer_naming_them(tmp_path: Path) -> None:
    state = _state(tmp_path)
    with ReadLock(state):
        with pytest.raises(StateLockedError, match=r"in use .*1 reader \(pid"):
            StateLock(state).acquire("ingestd run", wait_s=0.2)
    with ReadLock(state):  # the failed writer left no trace: readers still come in
        pass


def test_two_writers_never_share_a_state_dir_and_the_second_does_not_wait(
    tmp_path: Path,
) -> None:
    state = _state(tmp_path)
    first = StateLock(state)
    first.acquire("ingestd resync")
    try:
        with pytest.raises(StateLockedError, match=r"\(ingestd resync\)"):
            StateLock(state).acquire("ingestd run", wait_s=600)  # fails at once
        with pytest.raises(StateLockedError, match=r"\(ingestd resync\)"):
            ReadLock(state).acquire()  # a reader never waits for a writer
    finally:
        first.release()


def test_readers_of_the_store_take_turns(tmp_path: Path) -> None:
    state = _state(tmp_path)
    first = ReadLock(state, store=True)
    first.acquire()
    second = ReadLock(state, store=True)
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(second.acquire() is None))
    t.start()
    try:
        with ReadLock(state):  # a reader that does not open the store is not held up
            pass
        assert not got
    finally:
        first.release()
        t.join(30)
    assert got == [True]
    second.release()


def test_another_process_reading_is_named_by_its_command(tmp_path: Path) -> None:
    state = _state(tmp_path)
    code = (
        "import sys, time; from ingestd.daemon.wire.statelock import ReadLock; "
        f"lock = ReadLock({str(state)!r}); lock.acquire(); print('in', flush=True); "
        "sys.stdin.readline()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "in"
        assert [pid for pid, _ in lock_readers(state)] == [proc.pid]
        with pytest.raises(StateLockedError, match=rf"pid {proc.pid}: python"):
            StateLock(state).acquire("ingestd run", wait_s=0.1)
    finally:
        proc.communicate("\n", timeout=30)
    after = StateLock(state)
    after.acquire("ingestd run")  # the reader ended: its lock went with it
    after.release()
