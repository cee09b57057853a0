"""Where an evaluation runs: in the daemon that holds the state dir, or on scratch state.

* :func:`run_in_daemon` is the control command ``eval``: the host is the daemon's
  engine. The eval collections live in its store beside the real ones (listed in the
  ledger, :mod:`ingestd.daemon.evaluation.collections`), the model is the one it has loaded,
  and the run is sliced like a resync: at its checkpoints the daemon pings systemd,
  answers searches and writes other files' changes, and SIGTERM cancels it.
  ``eval-progress`` and ``eval-cancel`` are answered off the engine thread while
  ``eval`` holds it (:data:`~ingestd.daemon.commands.routes.ROUTES`).
* :func:`run_local` runs without a daemon: the host is an engine on a scratch state dir
  (embedded store and manifest in the temp folder, removed afterwards); only the state
  dir's embedding cache is used.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ingestd.daemon.config import Config, ManifestConfig, QdrantConfig
from ingestd.daemon.engine import Engine
from ingestd.daemon.evaluation.collections import LEDGER, EvalCollections
from ingestd.daemon.evaluation.evaluate import (
    EvalCancelled,
    EvalError,
    EvalPlan,
    EvalProgress,
    Evaluation,
)
from ingestd.daemon.evaluation.questions import Question
from ingestd.daemon.evaluation.rulesets import LabeledRules
from ingestd.daemon.statedir import StatePaths, secure_state_dir
from ingestd.daemon.wire.errors import DaemonError

__all__ = ["eval_cancel", "eval_progress", "run_in_daemon", "run_local"]

_RUN_ID = re.compile(r"[0-9a-f]{8}\Z")
_RUNNING: dict[str, Evaluation] = {}
_RUNNING_LOCK = threading.Lock()


def run_local(
    cfg: Config,
    state_dir: Path,
    plan: EvalPlan,
    *,
    progress: Callable[[EvalProgress], None] | None = None,
    embed_model: Callable[[Sequence[str]], Any] | None = None,
) -> dict[str, Any]:
    """Run an evaluation without a daemon: scratch store and manifests, the real cache.

    Args:
        cfg: the configuration (embedding model, tokenizer, search settings, sources'
            include/exclude); its store and manifest are not used.
        state_dir: the state dir whose ``embeddings.db`` is used (created if missing).
        plan: the corpus, questions, rule sets and modes.
        progress: called as the run advances.
        embed_model: embedding callable overriding the configured model (tests).

    Returns:
        See :meth:`Evaluation.run <ingestd.daemon.evaluation.evaluate.Evaluation.run>`.

    Raises:
        EvalError: the corpus cannot be read or indexed.
    """
    secure_state_dir(state_dir)
    scratch = Path(tempfile.mkdtemp(prefix="ingestd-eval-"))
    try:
        host_cfg = cfg.model_copy(
            update={
                "sources": (),
                "qdrant": QdrantConfig(),
                "manifest": ManifestConfig(),
                "state_dir": None,
            }
        )
        host = Engine(host_cfg, scratch / "host", embed_model=embed_model)
        try:
            ev = Evaluation(
                host,
                plan,
                cache_path=StatePaths(Path(state_dir)).embeddings,
                scratch=scratch,
                progress=progress,
            )
            return ev.run()
        finally:
            host.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_in_daemon(
    engine: Engine,
    *,
    run: str,
    corpus: str,
    questions: list[dict[str, Any]],
    rule_sets: list[dict[str, Any]],
    modes: list[str],
) -> dict[str, Any]:
    """The control command ``eval``: run an evaluation on the daemon's engine thread.

    Collections left listed in the ledger by a run that did not finish (the daemon was
    killed) are dropped first.

    Args:
        engine: the daemon's engine (the host).
        run: the run id chosen by the client (8 hex digits), for ``eval-progress`` and
            ``eval-cancel``.
        corpus: the corpus root, absolute.
        questions: :meth:`Question.as_dict <ingestd.daemon.evaluation.questions.Question.as_dict>`
            of each.
        rule_sets: :meth:`~ingestd.daemon.evaluation.rulesets.LabeledRules.as_dict` of
            each.
        modes: search modes.

    Returns:
        See :meth:`Evaluation.run <ingestd.daemon.evaluation.evaluate.Evaluation.run>`.

    Raises:
        DaemonError: an invalid request (exit code 2), a corpus the daemon cannot read
            or index (1), or the run was cancelled or the daemon is stopping (130).
    """
    try:
        if not _RUN_ID.match(run):
            raise ValueError(f"run id must be 8 hex digits (got {run!r})")
        qs = [Question(**q) for q in questions]
        sets = [LabeledRules.from_dict(r) for r in rule_sets]
    except (TypeError, ValueError) as exc:
        raise DaemonError(f"invalid eval request: {exc}", 2) from None
    collections = EvalCollections(engine.resources.store, engine.resources.paths.root / LEDGER)
    scratch = Path(tempfile.mkdtemp(prefix="ingestd-eval-"))
    try:
        ev = Evaluation(
            engine,
            EvalPlan(Path(corpus), qs, sets, modes),
            cache_path=engine.resources.cache_path,
            scratch=scratch,
            collections=collections,
            run_id=run,
        )
        with _RUNNING_LOCK:
            if run in _RUNNING:
                raise ValueError(f"an evaluation with id {run} is running")
            _RUNNING[run] = ev
    except ValueError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise DaemonError(f"invalid eval request: {exc}", 2) from None
    try:
        used = {s.collection for s in engine.cfg.sources}
        used |= {str(s["collection"]) for s in engine.resources.manifest.sources()}
        with _RUNNING_LOCK:
            running = set(_RUNNING)
        collections.drop_leftovers(used=used, running=running)
        return ev.run()
    except EvalCancelled as exc:
        raise DaemonError(str(exc), 130) from None
    except EvalError as exc:
        raise DaemonError(str(exc), 1) from None
    finally:
        with _RUNNING_LOCK:
            _RUNNING.pop(run, None)
        shutil.rmtree(scratch, ignore_errors=True)


def eval_progress(run: str) -> dict[str, Any] | None:
    """The control command ``eval-progress``: where run ``run`` stands, or ``None``.

    Returns:
        :meth:`EvalProgress.as_dict <ingestd.daemon.evaluation.evaluate.EvalProgress.as_dict>`,
        or ``None`` when no such run is in flight.
    """
    with _RUNNING_LOCK:
        ev = _RUNNING.get(run)
    return ev.state.as_dict() if ev is not None else None


def eval_cancel(run: str) -> dict[str, bool]:
    """The control command ``eval-cancel``: end run ``run`` at its next checkpoint.

    Returns:
        ``{"cancelled": True}`` when the run was found.
    """
    with _RUNNING_LOCK:
        ev = _RUNNING.get(run)
    if ev is not None:
        ev.cancel.set()
    return {"cancelled": ev is not None}
