"""The client side of ``ingestd eval``: where it runs, and its progress display.

:func:`run` decides with the :class:`~ingestd.daemon.client.runner.Runner` every command
uses: it sends the evaluation to the daemon holding the state dir (control command
``eval``; a second connection polls ``eval-progress`` for the progress display, and
Ctrl-C sends ``eval-cancel``), or, with no daemon, runs it here on a scratch state dir
(:func:`ingestd.daemon.evaluation.runs.run_local`). The report is
:mod:`ingestd.daemon.evaluation.report`'s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ingestd.daemon.cli.shared.progress import interactive, progress_bars, sync_detail
from ingestd.daemon.client.runner import Runner
from ingestd.daemon.config import Config
from ingestd.daemon.evaluation.evaluate import EvalPlan, EvalProgress
from ingestd.daemon.wire.errors import DaemonError, NoDaemon

__all__ = ["LOG_EVERY_S", "POLL_S", "ProgressLog", "describe", "progress_display", "run"]

logger = logging.getLogger(__name__)

#: Seconds between two ``eval-progress`` requests.
POLL_S = 0.5
#: Seconds between two progress log lines of one phase (no terminal).
LOG_EVERY_S = 30.0


def run(
    cfg: Config,
    state_dir: Path,
    plan: EvalPlan,
    *,
    quiet: bool = False,
    runner: Runner | None = None,
) -> dict[str, Any]:
    """Run an evaluation through the daemon of ``state_dir``, or here without one.

    Args:
        cfg: the configuration.
        state_dir: the state dir (its daemon, or its embedding cache).
        plan: the corpus, questions, rule sets and modes.
        quiet: no progress display.
        runner: how the daemon is reached (default: ``Runner(state_dir)``).

    Returns:
        The raw results (:meth:`ingestd.daemon.evaluation.evaluate.Evaluation.run`).

    Raises:
        ingestd.daemon.wire.errors.DaemonError: the daemon reported an error (exit code 130
            when the run was cancelled).
        KeyboardInterrupt: Ctrl-C: the run is cancelled (its collections dropped, its
            scratch state removed).
        SystemExit: SIGTERM (exit code 143): the same.
    """
    runner = runner if runner is not None else Runner(state_dir)
    run_id = secrets.token_hex(4)

    def here() -> dict[str, Any]:
        from ingestd.daemon.evaluation.runs import run_local

        with progress_display(quiet) as show, _sigterm_exits():
            return run_local(cfg, state_dir, plan, progress=show)

    # a daemon answers the progress of a run it does not know at once (None)
    local_result, by_daemon = runner.run("eval-progress", {"run": run_id}, here)
    if not by_daemon:
        result: dict[str, Any] = local_result
        return result
    args = {
        "run": run_id,
        "corpus": str(Path(os.path.realpath(plan.corpus))),
        "questions": [q.as_dict() for q in plan.questions],
        "rule_sets": [s.as_dict() for s in plan.rule_sets],
        "modes": list(plan.modes),
    }
    return _through_daemon(runner, run_id, args, quiet)


def _through_daemon(
    runner: Runner, run_id: str, args: dict[str, Any], quiet: bool
) -> dict[str, Any]:
    """The control command ``eval``, its progress shown and Ctrl-C or SIGTERM cancelling it."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["result"] = runner.request("eval", args)
        except BaseException as exc:  # re-raised on the main thread
            box["error"] = exc

    worker = threading.Thread(target=call, name="ingestd-eval", daemon=True)
    worker.start()
    with progress_display(quiet) as show, _sigterm_exits():
        try:
            while worker.is_alive():
                worker.join(POLL_S)
                if show is not None and worker.is_alive():
                    with contextlib.suppress(NoDaemon, DaemonError, OSError):
                        state = runner.request("eval-progress", {"run": run_id}, timeout=10)
                        if state:
                            show(EvalProgress.from_dict(state))
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C, SIGTERM
            with contextlib.suppress(NoDaemon, DaemonError, OSError):
                runner.request("eval-cancel", {"run": run_id}, timeout=10)
                worker.join(30)  # the daemon drops the run's collections, then answers
            raise
    if "error" in box:
        raise box["error"]
    result: dict[str, Any] = box["result"]
    return result


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C (the run cancelled, scratch state removed), exit 143."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def exit_143(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, exit_143)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def progress_display(quiet: bool) -> Iterator[Callable[[EvalProgress], None] | None]:
    """Progress on stderr: a bar per rule set in a terminal, else :class:`ProgressLog` lines.

    While indexing: documents done, chunks embedded and the time left at the rate so
    far (:meth:`~ingestd.daemon.sync.types.SyncProgress.eta_seconds`); then the searches.

    Args:
        quiet: show nothing.
    """
    if quiet:
        yield None
        return
    if not interactive():
        yield ProgressLog()
        return
    with progress_bars() as show:

        def update(p: EvalProgress) -> None:
            shown = describe(p)
            if shown is not None:
                description, detail, done, total = shown
                show(p.index, description, done, total, detail)

        yield update


class ProgressLog:
    """Progress as log lines (pipes, journald): at each new phase, then every ``every`` s.

    Args:
        every: seconds between two lines of one phase.
        now: the clock, in seconds (monotonic).
    """

    def __init__(self, every: float = LOG_EVERY_S, now: Callable[[], float] = time.monotonic):
        self.every = every
        self.now = now
        self._phase: tuple[int, str, str] | None = None
        self._last = 0.0

    def __call__(self, p: EvalProgress) -> None:
        """Log ``p`` if its phase is new or the last line is ``every`` seconds old."""
        shown = describe(p)
        if shown is None:
            return
        phase = (p.index, p.phase, p.sync.phase if p.sync and p.phase == "indexing" else "")
        t = self.now()
        if phase == self._phase and t - self._last < self.every:
            return
        self._phase, self._last = phase, t
        description, detail, _, _ = shown
        logger.info("eval %d/%d: %s: %s", p.index + 1, p.rule_sets, description, detail)


def describe(p: EvalProgress) -> tuple[str, str, int, int] | None:
    """What to show of ``p``: description, detail, work done and total (bytes or searches).

    Returns:
        ``None`` while indexing has not reported yet.
    """
    if p.phase == "searching":
        return (
            f"searching with {p.rule_set}",
            f"{p.searched}/{p.searches} searches",
            p.searched,
            p.searches,
        )
    s = p.sync
    if s is None:
        return None
    return f"indexing with {p.rule_set}", sync_detail(s), s.bytes_done, s.bytes_total
