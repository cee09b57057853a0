"""How ``ingestd mcp`` on stdio stops on SIGINT or SIGTERM: at once, whatever it waits in.

Python runs a signal's handler between two bytecodes of the main thread. The stdio
server's main thread spends its life in the event loop's ``epoll_wait(2)``, with no
timeout while no call is in flight, and the loop has no wakeup fd of its own (asyncio
sets one only for :meth:`asyncio.loop.add_signal_handler`). A signal that lands after
the loop's last look at the pending signals and before that wait is caught at C level,
then held until the loop wakes for another reason: with a client that sends nothing,
forever. ``ingestd chunk`` of a FIFO had the same race before its ``read(2)`` (see
:func:`ingestd.daemon.readfile.read_file`); there the wait could be cut into slices,
here the wait is the SDK's.

So the C-level handler's other duty is used: it writes the signal's number to the
wakeup fd (:func:`signal.set_wakeup_fd`) the moment the signal arrives, and a thread
blocked reading that pipe ends the process. Installed before the SDK is imported, a
Ctrl-C during the start (about a second of imports) is seen too.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

__all__ = ["STOP_SIGNALS", "exit_on_stop_signals"]

#: The signals that stop the server.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: The exit status set by :func:`exit_on_stop_signals`, once it ran.
_installed: list[int] = []


def _leave(code: int) -> None:
    try:
        sys.stderr.flush()
    finally:
        os._exit(code)


def exit_on_stop_signals(code: int = 0) -> None:
    """From now on, SIGINT or SIGTERM ends the process with ``code``, without delay.

    The exit is :func:`os._exit`: a tool call in flight is abandoned (the sync engine's
    write order makes an interrupted write harmless) and stdout gets nothing more.

    Args:
        code: the exit status (``ingestd mcp`` documents 0: the stop was asked for).

    Raises:
        ValueError: not called from the main thread (:func:`signal.set_wakeup_fd`).
    """
    if _installed == [code]:  # the console script took them (ingestd.daemon.startstop)
        return
    _installed[:] = [code]
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # the C handler must never block on a full pipe

    def handler(_sig: int, _frame: FrameType | None) -> None:
        _leave(code)

    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)

    def watch() -> None:
        os.read(read_end, 1)  # one byte per signal, written by the C-level handler
        _leave(code)

    threading.Thread(target=watch, name="ingestd-stop-signals", daemon=True).start()
