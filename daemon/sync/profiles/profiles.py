"""Which profile made each collection, and the models and rules those profiles load.

A collection is written and searched with the profile (:mod:`~ingestd.daemon.sync.profiles.profile`)
that made its current version: the configured one, unless the manifest records another
(a migration to the configured one is due, running, or was aborted: see
:mod:`ingestd.daemon.migration.migrate`). :class:`Profiles` loads each profile once,
shares the embedding cache and the counters among them, and wraps every model call
(the daemon counts calls and pings the watchdog around them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ingestd.daemon.config import Config
from ingestd.daemon.sync.checkpoints import Checkpoints
from ingestd.daemon.sync.profiles.profile import Profile, ProfileUnavailableError, config_for
from ingestd.daemon.sync.profiles.settings import describe, profile_key, recorded_settings
from ingestd.store.common.extras import extra_hint
from ingestd.store.manifest.manifest import Manifest

if TYPE_CHECKING:
    from ingestd.store.embedding.cache import EmbedStats
    from ingestd.store.embedding.model import Endpoint

__all__ = ["SECONDS_PER_EMBED_CALL", "EmbedFn", "ModelFactory", "Profiles", "Wrap"]

logger = logging.getLogger(__name__)

#: Target duration of one call of a local embedding model, in seconds: calls shrink
#: below ``embedding.batch_size`` texts when the machine is slow, so that pings and stop
#: requests are never far apart. Not for an embedding server: its calls are
#: ``batch_size`` texts per request, ``concurrency`` requests at once (its
#: configuration), and the engine serves searches and stop requests while they are in
#: flight (:meth:`Profiles.call_model`).
SECONDS_PER_EMBED_CALL = 1.0

#: An embedding callable: texts -> ``(n, dim)`` float32 unit vectors.
EmbedFn = Callable[[Sequence[str]], Any]
#: Makes the embedding callable of a model description (``ModelInfo``).
ModelFactory = Callable[[Any], EmbedFn]
#: Wraps an embedding callable (counting, watchdog pings).
Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]


class Profiles:
    """The configured profile, the profiles of current versions, and their models.

    Args:
        cfg: validated config (the configured profile).
        manifest: where each collection's profile is recorded.
        checkpoints: a stop request ends a model call; a model load shows as a phase.
        cache: the embedding cache when it is open already (see :meth:`attach_cache`).
        embed_model: embedding callable overriding every profile's model (tests).
        model_factory: makes the embedding callable of a model (tests: one loaded model
            shared by several engines); default: the configured backend, loaded lazily.

    Attributes:
        profile: the configured profile.
        stats: embedding counters shared by every profile's chunk embedder.

    Raises:
        ingestd.store.embedding.embedder.ModelNotFoundError: the model is not available locally.
        ingestd.chunkers.sizing.tokenizers.TokenizerError: the tokenizer is not bundled.
    """

    def __init__(
        self,
        cfg: Config,
        manifest: Manifest,
        checkpoints: Checkpoints,
        *,
        cache: Any = None,
        embed_model: EmbedFn | None = None,
        model_factory: ModelFactory | None = None,
    ) -> None:
        from ingestd.store.embedding.cache import EmbedStats  # numpy: only when an engine is made

        self.cfg = cfg
        self.manifest = manifest
        self.checkpoints = checkpoints
        self.stats: EmbedStats = EmbedStats()
        self._cache = cache
        self._embed_override = embed_model
        self._model_factory = model_factory
        self._wrap_model: Wrap | None = None
        self._profiles: dict[str, Profile] = {}
        self._current: dict[str, Profile] = {}  # collection -> profile of its current version
        self._rekeys: list[tuple[str, str]] = []  # cache fingerprints to move when it opens
        self.profile = self._profile(cfg)

    def attach_cache(self, cache: Any) -> None:
        """Make every profile's embedders, present and future, use ``cache``."""
        self._cache = cache
        for p in self._profiles.values():
            p.embedder.cache = p.sentence_embedder.cache = cache
        for old, new in self._rekeys:
            cache.rekey(old, new)
        self._rekeys.clear()

    def _taken_over(self, collection: str, settings: dict[str, Any]) -> bool:
        """Take over a collection recorded under an alias of the configured fingerprint.

        Its vectors are the configured profile's (the backend's
        :meth:`~ingestd.store.embedding.spec.BackendSpec.aliases`: e.g. ``onnx`` before
        its float32 graph was taken for torch's): the record is rewritten, and the
        embedding cache's vectors move to the new fingerprint, so nothing is embedded
        again (documents are re-chunked where their rule fingerprint changed, from the
        cache).
        """
        from ingestd.store.embedding.backends import backend_spec

        model = self.profile.model
        ours = self.profile.settings
        if model.files_fingerprint is None or any(
            settings.get(k) != ours[k] for k in ("tokenizer", "fit_model", "dim")
        ):
            return False
        old = str(settings["model_fingerprint"])
        if old not in backend_spec(model.backend).aliases(model.files_fingerprint, model.recipe):
            return False
        logger.info(
            "collection %s: its vectors were recorded under fingerprint %s, which %s now "
            "calls %s (the same vectors); taken over without embedding anything again",
            collection,
            old[:12],
            model.backend,
            model.fingerprint[:12],
        )
        self.manifest.record_collection(collection, ours)
        for suffix in ("", ":sentence"):
            pair = (old + suffix, model.fingerprint + suffix)
            if self._cache is not None:
                self._cache.rekey(*pair)
            else:
                self._rekeys.append(pair)
        return True

    def _profile(self, cfg: Config) -> Profile:
        """The profile of ``cfg`` (one instance per profile key)."""
        for p in self._profiles.values():
            if p.cfg == cfg:
                return p
        prof = Profile(
            cfg,
            self._new_model,
            self._embed,
            self.stats,
            # a remote backend sends `concurrency` requests of batch_size texts at once
            max_texts_per_call=cfg.embedding.batch_size
            * (cfg.embedding.concurrency if cfg.embedding.endpoint else 1),
            seconds_per_call=None if cfg.embedding.endpoint else SECONDS_PER_EMBED_CALL,
        )
        known = self._profiles.get(prof.key)
        if known is not None:
            return known
        if self._cache is not None:
            prof.embedder.cache = prof.sentence_embedder.cache = self._cache
        if self._wrap_model is not None:
            _wrap(prof, self._wrap_model)
        self._profiles[prof.key] = prof
        return prof

    def profile_for(self, settings: dict[str, Any]) -> Profile:
        """The profile recorded as ``settings`` (loaded once; the configured one if equal).

        Raises:
            ProfileUnavailableError: its model is not found, or its files changed.
        """
        from ingestd.store.embedding.embedder import ModelNotFoundError

        key = profile_key(settings)
        if key in self._profiles:
            return self._profiles[key]
        try:
            prof = self._profile(config_for(self.cfg, settings))
        except ModelNotFoundError as exc:
            raise ProfileUnavailableError(_unavailable(settings, str(exc))) from None
        if prof.key != key:
            why = f"its files changed (fingerprint now {prof.model.fingerprint[:12]})"
            raise ProfileUnavailableError(_unavailable(settings, why))
        return prof

    def profile_of(self, collection: str, *, check: bool = False) -> Profile:
        """The profile that made the current version of ``collection``.

        Args:
            collection: the collection name.
            check: read the manifest again, and forget an aborted migration when the
                config went back to the profile of the current version.

        Raises:
            ProfileUnavailableError: the recorded profile's model cannot be loaded.
        """
        if not check and collection in self._current:
            return self._current[collection]
        rec = self.manifest.collection_record(collection)
        if rec is None:
            return self.profile
        settings = recorded_settings(rec, self.profile.settings)
        if profile_key(settings) == self.profile.key or self._taken_over(collection, settings):
            prof = self.profile
            if check and rec.get("aborted"):  # the config went back: nothing is pending
                self.manifest.set_collection_aborted(collection, None)
        else:
            aborted = rec.get("aborted")
            if check and aborted and profile_key(aborted) == self.profile.key:
                logger.error(
                    "collection %s: its migration to the configured %s was aborted "
                    "(`ingestd migrate --abort`); it keeps %s. Set the config back to that, "
                    "or run `ingestd migrate` to start the migration again",
                    collection,
                    self.profile.describe(),
                    describe(settings),
                )
            prof = self.profile_for(settings)
        self._current[collection] = prof
        return prof

    def forget_current(self, collection: str) -> None:
        """Read ``collection``'s profile from the manifest again at its next use."""
        self._current.pop(collection, None)

    def active(self) -> list[Profile]:
        """The configured profile, then those of current versions that differ."""
        out = [self.profile]
        for p in self._current.values():
            if p not in out:
                out.append(p)
        return out

    def release(self) -> None:
        """Forget profiles no collection uses any more (their models' memory is freed).

        Called when a migration has switched: the previous model is no longer needed.
        """
        active = {p.key for p in self.active()}
        for key in [k for k in self._profiles if k not in active]:
            del self._profiles[key]

    # -- models --------------------------------------------------------------------------

    def _new_model(self, profile: Profile) -> EmbedFn:
        if self._embed_override is not None:
            return self._embed_override
        if self._model_factory is not None:
            return self._model_factory(profile.model)
        from ingestd.store.embedding.embedder import load_embedder

        e = profile.cfg.embedding
        _say_fallback(e)
        model: EmbedFn = load_embedder(
            profile.model,
            device=e.device,
            batch_size=e.batch_size,
            threads=e.threads,
            cache_dir=e.cache_dir,
        )
        return model

    def _embed(self, profile: Profile, texts: Sequence[str]) -> Any:
        """Run ``profile``'s model; a stop request ends work here too."""
        self.checkpoints.raise_if_stopped()
        model = profile.embed_model()
        if not getattr(model, "loaded", True):
            self.checkpoints.set_phase(f"loading embedding model {profile.model.name}")
        try:
            if profile.model.endpoint is not None:
                return self.call_model(model, texts, profile.model.endpoint)
            return model(texts)
        finally:
            self.checkpoints.set_phase("indexing")

    def call_model(self, model: EmbedFn, texts: Sequence[str], endpoint: Endpoint) -> Any:
        """``model(texts)`` of an embedding server, with checkpoints while it is in flight.

        A server's requests take what they take (a full batch of a loaded server: many
        seconds), and nothing of this process works on them. So with an owner hooked
        to the checkpoints (the daemon), the requests run in a worker thread while this
        (the engine) thread reaches a checkpoint every half second
        (:meth:`~ingestd.daemon.sync.checkpoints.Checkpoints.wait_for`): searches are
        served and the watchdog is pinged, and a stop request returns at once (the
        requests finish on their own; their vectors are not used). The checkpoints go
        on for at most the time the endpoint's requests may take
        (:func:`~ingestd.store.embedding.remote_backend.longest_call_s`); past it the
        pings stop, so a call that hangs trips the systemd watchdog.

        Raises:
            SyncInterrupted: a stop was requested.
        """
        from ingestd.store.embedding.remote_backend import longest_call_s

        if self.checkpoints.on_checkpoint is None:
            return model(texts)
        what = f"a call of {len(texts)} texts to {endpoint.url}"
        return self.checkpoints.wait_for(lambda: model(texts), longest_call_s(endpoint), what)

    def instrument(self, wrap: Wrap) -> None:
        """Wrap every model call of every profile, present and future, with ``wrap``."""
        self._wrap_model = wrap
        for p in self._profiles.values():
            _wrap(p, wrap)

    @property
    def model_loaded(self) -> bool:
        """Whether the configured model's weights are loaded."""
        return self.profile.loaded

    def load(self) -> bool:
        """Load the models now (thread-safe; the daemon preloads them in the background).

        Loads the configured model and, while a collection is not yet migrated to it,
        the model of its current version (searches and changes need both).

        Returns:
            ``True`` when a model was loaded, ``False`` when there was nothing to load
            (already loaded, or an injected embedding callable).
        """
        loaded = False
        for p in self.active():
            loaded = p.load() or loaded
        return loaded

    @property
    def last_use(self) -> float:
        """``time.monotonic()`` of the last use of any profile's model."""
        return max((p.last_use for p in list(self._profiles.values())), default=0.0)

    def unload(self) -> bool:
        """Let every profile's model weights go (see :meth:`Profile.unload`).

        Returns:
            Whether any weights were loaded.
        """
        unloaded = False
        for p in list(self._profiles.values()):
            unloaded = p.unload() or unloaded
        return unloaded

    def unload_idle(self, idle_s: float) -> bool:
        """Let the models' weights go once unused for ``idle_s`` seconds (until next use).

        Returns:
            Whether any weights were let go (``False`` while a model was used within
            ``idle_s`` seconds).
        """
        if time.monotonic() - self.last_use < idle_s:
            return False
        return self.unload()


_fallback_said = False


def _say_fallback(e: Any) -> None:
    """One log line, once per process, when the default backend fell back to a slower one.

    ``torch`` where onnxruntime is missing; ``onnx`` on a CPU with native bfloat16 where
    OpenVINO is missing.
    """
    from ingestd.store.embedding.runtimes.cpu import native_bf16

    global _fallback_said
    if _fallback_said or "backend" in e.model_fields_set or e.device != "cpu":
        return
    if e.backend == "torch":
        _fallback_said = True
        logger.info(
            "embedding with torch: onnxruntime is not installed here (`pip install "
            "onnxruntime onnx` embeds faster, with half the memory)"
        )
    elif e.backend == "onnx" and native_bf16():
        _fallback_said = True
        logger.info(
            "embedding with onnxruntime: OpenVINO, which embeds about 3 times as fast on "
            "this CPU (it has bfloat16), is not installed here; it comes with %s",
            extra_hint("openvino"),
        )


def _wrap(profile: Profile, wrap: Wrap) -> None:
    for emb in (profile.embedder, profile.sentence_embedder):
        emb.model = wrap(emb.model)


def _unavailable(settings: dict[str, Any], why: str) -> str:
    return (
        f"the points of this collection were made by {describe(settings)}, which cannot be "
        f"loaded: {why}. It is needed until the collection is migrated to the configured "
        "model (searches of the current version embed the query with it, and changes are "
        "written with it): put it back, or `ingestd forget` the collection's sources and "
        "index them again"
    )
