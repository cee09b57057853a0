"""Reading a file that may make the reader wait (a FIFO, a pipe), with signals seen.

The config and ``ingestd chunk`` read files a user names: a regular file is read at
once; anything else is read in waits of :data:`POLL_SLICE_S` seconds, so Ctrl-C and
SIGTERM reach their handlers however long the writer takes.
"""

from __future__ import annotations

import errno
import os
import select
import stat as stat_mod
from pathlib import Path

__all__ = ["POLL_SLICE_S", "read_file"]

#: Longest wait for a pipe's next bytes, in seconds, before signals are looked at again.
POLL_SLICE_S = 0.2
#: Largest read in one call, in bytes.
_READ_SIZE = 1 << 16


def read_file(file: Path) -> bytes:
    """The bytes of ``file``: a regular file, or a pipe, FIFO or terminal read to its end.

    Ctrl-C is seen however the reading waits. Python runs a signal's handler between
    two bytecodes, so a SIGINT that lands after the last check and before a blocking
    ``open(2)`` or ``read(2)`` is caught at C level but never acted on: the call is
    not interrupted (PEP 475 retries only a call that failed with ``EINTR``), and a
    FIFO whose writer never writes keeps the command waiting forever. So the file is
    opened with ``O_NONBLOCK`` (a FIFO's open does not wait for a writer), and anything
    but a regular file is read in waits of :data:`POLL_SLICE_S` seconds with
    :func:`select.poll`, between which the interpreter runs the pending signal's
    handler (Ctrl-C's default: ``KeyboardInterrupt``; ``ingestd run`` mid-start: exit
    0). A regular file never waits: it is read at once.

    Args:
        file: the path to read.

    Returns:
        Its bytes, up to the end of the file (for a pipe: until every writer closed it).

    Raises:
        OSError: it cannot be opened or read (a folder: ``IsADirectoryError``).
        KeyboardInterrupt: Ctrl-C while it waited.
    """
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat_mod.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(file))
        if stat_mod.S_ISREG(mode):
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb", closefd=False) as f:
                return f.read()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        parts: list[bytes] = []
        while True:
            if not poller.poll(POLL_SLICE_S * 1000):
                continue  # back in the interpreter: a pending Ctrl-C is raised here
            try:
                part = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                continue
            if not part:
                return b"".join(parts)
            parts.append(part)
    finally:
        os.close(fd)
