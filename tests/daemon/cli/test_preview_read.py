"""``ingestd chunk`` reads a regular file, a FIFO or a pipe, and Ctrl-C always stops it.

A SIGINT that lands just before a blocking ``read(2)`` is caught by Python's C-level
handler but never acted on, because the call is not interrupted. The test puts the
reader in exactly that state without a race: once the main thread sleeps in the kernel
(``/proc``), the signal is sent to another thread of the process (``pthread_kill``), so
the handler trips the flag while the main thread waits, uninterrupted.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingestd.daemon.readfile import read_file
from tests.helpers import fifo_writer, wait_for

#: Seconds after which a reader that missed the signal is released (the test then fails).
RESCUE_S = 30.0


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "never.md"
    os.mkfifo(path)
    return path


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt``, as in a command (a test worker may ignore it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _sleeps_in_the_kernel(tid: int) -> bool:
    """Whether thread ``tid`` of this process sleeps in a system call other than a lock's."""
    task = Path(f"/proc/self/task/{tid}")
    state = (task / "stat").read_text().rpartition(") ")[2][0]
    wchan = (task / "wchan").read_text()
    return state == "S" and wchan not in ("", "0") and "futex" not in wchan


def test_a_ctrl_c_caught_while_a_fifo_read_waits_is_raised(fifo: Path, sigint_raises: None) -> None:
    reader = threading.get_native_id()
    done = threading.Event()
    rescued = threading.Event()

    def ctrl_c_then_rescue() -> None:
        writer = wait_for(lambda: fifo_writer(fifo), 60, "read_file to open the FIFO")
        try:
            wait_for(lambda: _sleeps_in_the_kernel(reader), 60, "read_file to wait for bytes")
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # the handler runs here
            if not done.wait(RESCUE_S):  # the reader missed it: end its read, fail the test
                rescued.set()
                os.write(writer, b"late")
        finally:
            os.close(writer)

    helper = threading.Thread(target=ctrl_c_then_rescue)
    helper.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            read_file(fifo)
    finally:
        done.set()
        helper.join()
    assert not rescued.is_set(), "the read went on waiting after Ctrl-C"


def test_a_fifo_is_read_to_its_end_once_its_writer_closes(fifo: Path) -> None:
    text = b"# Title\n\n" + b"A line of the page.\n" * 10_000  # more than one pipe buffer

    def write() -> None:
        writer = wait_for(lambda: fifo_writer(fifo), 60, "read_file to open the FIFO")
        try:
            os.set_blocking(writer, True)
            os.write(writer, text)
        finally:
            os.close(writer)

    helper = threading.Thread(target=write)
    helper.start()
    try:
        assert read_file(fifo) == text
    finally:
        helper.join()


def test_a_regular_file_is_read_whole_and_a_folder_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_bytes(b"\xef\xbb\xbf# Title\r\n\r\nbody\x00\n")
    assert read_file(page) == page.read_bytes()
    with pytest.raises(IsADirectoryError):
        read_file(tmp_path)
