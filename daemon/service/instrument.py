"""How the service hooks the engine: its checkpoints, its model calls, the model's life.

Once the daemon is ready, a background thread loads the embedding model
(``embedding.preload``), so that the first change is not slowed by the load; once
unused for ``embedding.keep_alive_s`` the model is let go (:func:`unload_idle_model`),
so that an idle daemon holds no weights. A call of
the model is at most ``embedding.batch_size`` texts (a second or so): the watchdog ping
after it comes from progress. A call that finds the model still preloading waits for
the load with pings (loading is bounded work in another thread), for at most
:data:`MODEL_LOAD_GRACE_S`.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ingestd.daemon.engine import Engine
from ingestd.daemon.service.systemd import WatchdogPinger
from ingestd.daemon.sync.memory import release_free_memory

__all__ = ["MODEL_LOAD_GRACE_S", "ModelPreload", "instrument", "unload_idle_model"]

logger = logging.getLogger(__name__)

MODEL_LOAD_GRACE_S = 600.0  # longest the watchdog is fed while the model preloads


class ModelPreload:
    """Loads the embedding model in a background thread; model calls wait for it.

    Args:
        watchdog: pinged while a model call waits for the load.
    """

    def __init__(self, watchdog: WatchdogPinger) -> None:
        self.watchdog = watchdog
        self._thread: threading.Thread | None = None

    def start(self, engine: Engine) -> None:
        """Load the model of ``engine`` in the background (failures are left to its first use)."""

        def load() -> None:
            try:
                if engine.profiles.load():
                    logger.debug("embedding model preloaded")
            except Exception:  # the engine thread reports it when it needs the model
                logger.debug("preloading the embedding model failed", exc_info=True)

        self._thread = threading.Thread(target=load, name="ingestd-preload", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Wait for a running preload, with pings, for at most :data:`MODEL_LOAD_GRACE_S`."""
        t = self._thread
        if t is None or not t.is_alive() or t is threading.current_thread():
            return
        deadline = time.monotonic() + MODEL_LOAD_GRACE_S
        while t.is_alive() and time.monotonic() < deadline:
            self.watchdog.ping()
            t.join(timeout=min(0.5, self.watchdog.interval or 0.5))


def unload_idle_model(engine: Engine | None, keep_alive_s: float | None, busy: bool) -> bool:
    """Let the embedding model go once unused for ``embedding.keep_alive_s`` seconds.

    The weights are most of an idle daemon's memory (about 100 MB for the bundled
    model with ``onnx``, 350 MB with ``torch``); the next search or change loads them
    again (about 0.2 s with ``onnx``): the same trade as Ollama's ``keep_alive``. Run
    on the engine thread; a search that begins meanwhile on another thread finishes
    with the weights it holds (the embedders' ``unload`` is thread-safe). The freed
    memory goes back to the system
    (:func:`~ingestd.daemon.sync.memory.release_free_memory`).

    Args:
        engine: the running engine (``None``: nothing to do).
        keep_alive_s: ``embedding.keep_alive_s`` (``None``: never unload).
        busy: jobs or changes wait: they will need the model.

    Returns:
        Whether the model was unloaded now.
    """
    if keep_alive_s is None or engine is None or busy or not engine.profiles.model_loaded:
        return False
    if not engine.profiles.unload_idle(keep_alive_s):
        return False
    gc.collect()  # torch's modules hold reference cycles: their weights go with them
    release_free_memory()
    logger.info(
        "embedding model unloaded after %.0f s unused (embedding.keep_alive_s); the next "
        "search or change loads it again",
        keep_alive_s,
    )
    return True


def instrument(
    engine: Engine,
    *,
    checkpoint: Callable[[bool], None],
    before_call: Callable[[], None],
    ping: Callable[[], None],
) -> None:
    """Hook ``engine``: its checkpoints, and watchdog pings around its model calls.

    Args:
        engine: the engine to hook.
        checkpoint: called at every checkpoint with ``serve_changes`` (see
            :meth:`~ingestd.daemon.service.jobs.JobQueue.run_nested`).
        before_call: called before each call of a model (counts it, waits for the
            preload).
        ping: pings the systemd watchdog; called before and after each model call.
    """
    engine.checkpoints.on_checkpoint = checkpoint

    def wrap(model: Callable[..., Any]) -> Callable[..., Any]:
        def counted(texts: Any) -> Any:
            before_call()
            ping()
            out = model(texts)
            ping()
            return out

        return counted

    engine.profiles.instrument(wrap)
