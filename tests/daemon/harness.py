"""A real :class:`Service` in a thread, with the real file watcher and a fake embedder.

Used by the watcher, editor-pattern, service, metrics and fault tests: the service
runs ``serve()`` on a background thread (signal handlers are only installed on the
main thread), tests act on a temporary tree with plain ``os`` calls, then wait with
deadlines until the daemon is idle and ``verify`` is clean. Every engine call goes
through :meth:`Service.submit`, because the embedded store belongs to the service's
thread. Plans applied by the engine are recorded, so a test can prove that a path was
processed once, or that a rename re-keyed chunks without the embedder being called.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers import (
    SPARSE_KEY,
    CountingEmbedder,
    fake_vectors,
    oracle,
    wait_for,
    without_provenance,
)

#: Fast batching for tests: 150 ms quiet period, 3 s cap; no periodic rescan.
FAST_WATCH = {"debounce_ms": 150, "max_delay_ms": 3000, "rescan_interval_s": 0}


@contextmanager
def fast_tmp(prefix: str = "svc-") -> Iterator[Path]:
    """A scratch folder on tmpfs when there is one (embedded Qdrant commits per point)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Harness:
    """Runs a :class:`~ingestd.daemon.service.service.Service` on ``root`` in a thread.

    Args:
        root: the watched tree.
        state: the state dir.
        embed: the embedding callable (a :class:`CountingEmbedder` usually).
        store_factory: builds the vector store for an engine (fault injection).
        config_path: a YAML config to load (and reload on :meth:`reload`).
        configure: called with each engine the service makes (test hooks).
        overrides: top-level config keys.
    """

    def __init__(
        self,
        root: Path,
        state: Path,
        embed: CountingEmbedder,
        *,
        store_factory: Callable[[Path], Any] | None = None,
        config_path: Path | None = None,
        configure: Callable[[Any], None] | None = None,
        **overrides: Any,
    ) -> None:
        from ingestd.daemon.config import load_config
        from ingestd.daemon.engine import Engine
        from ingestd.daemon.service.service import Service

        self.root = root
        self.state = state
        self.embed = embed
        self.applied: list[Any] = []  # every Plan the engine applied
        overrides.setdefault("watch", FAST_WATCH)
        self.config_path = config_path
        self.overrides = {k: v for k, v in overrides.items() if k != "watch"}

        def load() -> Any:
            return load_config(
                config_path, roots=[] if config_path else [root], overrides=overrides
            )

        def factory(cfg: Any, state_dir: Path) -> Any:
            store = store_factory(state_dir) if store_factory else None
            eng = Engine(cfg, state_dir, embed_model=embed, store=store)
            apply = eng.apply

            def recording(plan: Any, **kw: Any) -> Any:
                self.applied.append(plan)
                return apply(plan, **kw)

            eng.apply = recording  # type: ignore[method-assign]
            if configure is not None:
                configure(eng)
            return eng

        self.service = Service(load(), state, reload_config=load, engine_factory=factory)
        self.code: int | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="test-service", daemon=True)

    def _serve(self) -> None:
        try:
            self.code = self.service.serve()
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 60, *, wait_idle: bool = True) -> Harness:
        """Start the service and wait for its start-up reconcile to finish (``wait_idle``)."""
        # the CLI's setup_logging() (CliRunner tests in this process) stops propagation
        # to the root logger, where pytest's caplog listens
        logging.getLogger("ingestd").propagate = True
        self._thread.start()
        wait_for(
            lambda: self.service.started.is_set() or not self._thread.is_alive(),
            timeout,
            "service start-up",
        )
        assert self.error is None, self.error
        if wait_idle:
            self.wait_idle(timeout)
        return self

    def stop(self, timeout: float = 20) -> int | None:
        """Ask the service to exit and join it; returns its exit code."""
        self.service.request_exit()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the service did not stop in time"
        if self.error is not None:
            raise self.error
        return self.code

    def __enter__(self) -> Harness:
        return self if self._thread.ident is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        if self._thread.is_alive():
            self.stop()

    @property
    def alive(self) -> bool:
        """Whether ``serve()`` still runs."""
        return self._thread.is_alive()

    # -- engine access (on the service thread) ----------------------------------------------------

    def call(self, fn: Callable[[Any], Any], timeout: float = 60) -> Any:
        """Run ``fn(engine)`` on the service's engine thread and return its result."""
        return self.service.submit(lambda: fn(self.service.engine)).result(timeout)

    @property
    def source(self) -> str:
        """The (single) source name."""
        (name,) = self.service.engine.context.sources
        return str(name)

    def verify(self) -> Any:
        """``engine.verify(source)`` on the engine thread."""
        return self.call(lambda e: e.verify(self.source))

    def points(self) -> dict[str, dict[str, Any]]:
        """The store's points of the source (provenance removed)."""

        def read(e: Any) -> dict[str, dict[str, Any]]:
            points = dict(e.resources.store.scroll("ingestd"))
            for pid, vec in e.resources.store.sparse_vectors("ingestd", list(points)).items():
                points[pid][SPARSE_KEY] = (
                    (tuple(vec.indices), tuple(vec.values)) if vec is not None else None
                )  # as store_snapshot gives it, to compare with the oracle
            return points

        return without_provenance(self.call(read))

    # -- waiting ----------------------------------------------------------------------------------

    def wait_idle(self, timeout: float = 30) -> None:
        """Wait until no change, job or retry is pending."""
        wait_for(lambda: self.service.idle() or not self.alive, timeout, "the daemon to be idle")
        assert self.alive or self.error is None, self.error

    def settle(self, batches_before: int | None = None, timeout: float = 30) -> Any:
        """Wait for a new batch (when ``batches_before`` is given), idleness and a clean verify.

        Returns:
            The clean :class:`~ingestd.daemon.engine.VerifyReport`.
        """
        deadline = time.monotonic() + timeout
        if batches_before is not None:
            wait_for(
                lambda: self.service.batches_done > batches_before,
                timeout,
                "a batch of changes to be applied",
                interval=0.02,
            )

        def clean() -> Any:
            if not self.service.idle():
                return None
            rep = self.verify()
            return rep if rep.clean and self.service.idle() else None

        return wait_for(clean, max(1.0, deadline - time.monotonic()), "a clean verify", 0.05)

    def assert_matches_oracle(self, tmp: Path) -> None:
        """The live store holds exactly a from-scratch ingest of the tree (ids and payload)."""
        got = self.points()
        want = oracle(self.root, tmp, fake_vectors, **self.overrides)
        missing, orphans = set(want) - set(got), set(got) - set(want)
        assert not missing and not orphans, f"{len(missing)} missing, {len(orphans)} orphans"
        diff = [pid for pid in want if got[pid] != want[pid]]
        assert not diff, f"{len(diff)} points with a different payload, e.g. {diff[:3]}"

    def paths_applied(self, since: int = 0) -> list[str]:
        """Paths (re)chunked by the plans applied from plan number ``since`` on."""
        return [p for plan in self.applied[since:] for p in plan.index]
