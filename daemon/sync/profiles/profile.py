"""Profiles: the settings that decide every point of a collection, and what they load.

A *profile* is the embedding model, identified by its fingerprint (the model's files;
the backend and quantisation that run it are part of it), together with the two
chunking settings that change every chunk of every document: ``tokenizer`` (the unit of
every rule's token budget) and ``embedding.fit_model`` (every chunk held to the model's
own limit, counted with the model's tokenizer). Each collection records the profile
that made its points (manifest ``collections.settings``). When the configured profile
differs, the collection is *migrated* to a new version behind its alias
(:mod:`ingestd.daemon.migration.migrate`); until the switch its current version is kept in sync,
and searched, with the profile that made it.

Not part of a profile, and why: the rules (a rule's params, its chunker's version, the
chunkers' code, the BM25 contract) decide the chunks of the documents they match; a
change re-chunks those documents in place (their rule fingerprint changed) and keeps
every chunk whose text is unchanged, with its id and vector. A profile change alters
every chunk's vector or boundaries: done in place, searches would rank a collection
that is half one model and half the other (their scores are not comparable) for as
long as the re-embedding takes, and the change could not be taken back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ingestd.daemon.config import Config
from ingestd.daemon.sync.preparing.rules import RuleSet, build_context
from ingestd.daemon.sync.profiles.settings import describe, profile_key
from ingestd.store.manifest.manifest import ModelMismatchError

if TYPE_CHECKING:
    from ingestd.store.embedding.cache import EmbedStats
    from ingestd.store.embedding.model import ModelInfo

__all__ = [
    "INPUT_TYPE_KEYS",
    "PROMPT_KEYS",
    "REMOTE_KEYS",
    "VECTOR_KEYS",
    "Profile",
    "ProfileUnavailableError",
    "config_for",
    "differences",
    "model_of",
    "settings_of",
]

#: Keys of the ``embedding`` config section that change the vectors (recorded with a
#: collection, so that the model of its current version can be loaded again during a
#: migration). Keys the running version does not know are left out.
VECTOR_KEYS = ("model", "backend")
#: Keys recorded besides for a remote backend: where its model answers and its limit
#: (the API key is not among them: only the name of its environment variable).
REMOTE_KEYS = ("url", "dimensions", "api_key_env", "api_key_header", "max_tokens")
#: Keys recorded besides when not empty: the prompts the model got
#: (:mod:`ingestd.store.embedding.prompts`).
PROMPT_KEYS = ("query_prompt", "document_prompt")
#: Keys recorded besides for a remote backend when set: the input types its requests
#: say (:mod:`ingestd.store.embedding.remote_backend`).
INPUT_TYPE_KEYS = ("query_input_type", "document_input_type")


class ProfileUnavailableError(ModelMismatchError):
    """The model that made a collection's current version cannot be loaded any more."""


def model_of(cfg: Config) -> ModelInfo:
    """The description of ``cfg``'s embedding model, from its files (no torch import).

    Raises:
        ingestd.store.embedding.embedder.ModelNotFoundError: the model is not available locally.
    """
    from ingestd.store.embedding.embedder import model_info

    e = cfg.embedding
    return model_info(e.model, e.backend, endpoint=e.endpoint, prompts=e.prompts)


def settings_of(cfg: Config, info: ModelInfo) -> dict[str, Any]:
    """The profile of ``cfg`` as a JSON-ready dict (what the manifest records).

    Keys: ``model`` (the configured name), ``embedding`` (:data:`VECTOR_KEYS` of the
    ``embedding`` section, :data:`REMOTE_KEYS` for a remote backend, and the prompts
    the model got, :data:`PROMPT_KEYS`, those not empty: a model without prompts is
    recorded as before they existed; and :data:`INPUT_TYPE_KEYS` when set),
    ``model_fingerprint``, ``dim``, ``tokenizer``, ``fit_model``.
    """
    emb = cfg.embedding
    fields = type(emb).model_fields
    keys = VECTOR_KEYS + (REMOTE_KEYS if info.endpoint is not None else ())
    prompts = {"query_prompt": info.query_prompt, "document_prompt": info.document_prompt}
    if info.endpoint is not None:
        prompts |= {k: getattr(info.endpoint, k) for k in INPUT_TYPE_KEYS}
    return {
        "model": info.name,
        "embedding": {k: getattr(emb, k) for k in keys if k in fields}
        | {k: v for k, v in prompts.items() if v},
        "model_fingerprint": info.fingerprint,
        "dim": info.dim,
        "tokenizer": cfg.tokenizer,
        "fit_model": bool(emb.fit_model),
    }


def config_for(cfg: Config, settings: Mapping[str, Any]) -> Config:
    """``cfg`` with the embedding model and chunking settings of profile ``settings``."""
    fields = type(cfg.embedding).model_fields
    emb = {k: v for k, v in dict(settings.get("embedding") or {}).items() if k in fields}
    emb.setdefault("model", settings["model"])
    for key in PROMPT_KEYS:  # not recorded: the model got none
        emb.setdefault(key, "")
    if "query_input_type" in fields:
        for key in INPUT_TYPE_KEYS:  # not recorded: none was said
            emb.setdefault(key, None)
    emb["fit_model"] = bool(settings["fit_model"])
    return cfg.model_copy(
        update={
            "embedding": cfg.embedding.model_copy(update=emb),
            "tokenizer": str(settings["tokenizer"]),
        }
    )


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two profiles, one ``what: old -> new`` line each."""
    out = []
    if old["model_fingerprint"] != new["model_fingerprint"]:
        out.append(
            f"embedding model: {old['model']} ({str(old['model_fingerprint'])[:12]}) -> "
            f"{new['model']} ({str(new['model_fingerprint'])[:12]})"
        )
    for key in ("tokenizer", "fit_model"):
        if old[key] != new[key]:
            out.append(f"{key}: {old[key]} -> {new[key]}")
    for key in PROMPT_KEYS + INPUT_TYPE_KEYS:
        was, now = (dict(s.get("embedding") or {}).get(key) or "" for s in (old, new))
        if was != now:
            out.append(f"embedding.{key}: {was!r} -> {now!r}")
    return out


class Profile:
    """A profile with what it loads: model description, rules, cached embedders.

    Args:
        cfg: the config, with the profile's embedding and chunking settings.
        new_model: makes the embedding callable of a profile (texts -> ``(n, dim)``
            float32 unit vectors); the weights may load lazily, on its first call.
        embed: calls the embedding callable of a profile on texts (the engine adds
            stop requests and progress around it).
        stats: counters shared by the chunk embedders of all the engine's profiles.
        max_texts_per_call: most texts per model call (``embedding.batch_size``).
        seconds_per_call: target duration of one model call, in seconds.

    Attributes:
        model: the model's description (fingerprint, dimension, tokenizer).
        settings: the profile as recorded in the manifest (:func:`settings_of`).
        key: :func:`~ingestd.daemon.sync.profiles.settings.profile_key` of ``settings``.
        embedder: vectors of chunk texts, through the embedding cache.
        sentence_embedder: vectors of sentences (the semantic chunker), cached apart.
        run_model: the embedding callable on texts as they are (no prompt), with the
            engine's work around it: what another engine borrows as its model.
        rules: the rules compiled with this profile's tokenizer and model.

    Raises:
        ingestd.store.embedding.embedder.ModelNotFoundError: the model is not available locally.
        ingestd.chunkers.sizing.tokenizers.TokenizerError: the tokenizer is not bundled.
    """

    def __init__(
        self,
        cfg: Config,
        new_model: Callable[[Profile], Any],
        embed: Callable[[Profile, Sequence[str]], Any],
        stats: EmbedStats,
        *,
        max_texts_per_call: int | None = None,
        seconds_per_call: float | None = None,
    ) -> None:
        from ingestd.store.embedding.cache import CachedEmbedder
        from ingestd.store.embedding.prompts import prompted
        from ingestd.store.vectors.ids import chunk_hash

        self.cfg = cfg
        self.model = model_of(cfg)
        self.settings = settings_of(cfg, self.model)
        self.key = profile_key(self.settings)
        self._new_model = new_model
        self._embed_model: Any = None
        #: ``time.monotonic()`` of the last :meth:`embed_model` (a search or a batch)
        self.last_use = time.monotonic()
        self._lock = threading.Lock()
        #: the model on texts as they are, no prompt (the engine's stop checks around it)
        self.run_model: Callable[[Sequence[str]], Any] = lambda texts: embed(self, texts)
        self.embedder, self.sentence_embedder = (
            CachedEmbedder(
                lambda texts: self.run_model(prompted(self.model.document_prompt, texts)),
                fingerprint,
                None,
                chunk_hash,
                max_texts_per_call=max_texts_per_call,
                seconds_per_call=seconds_per_call,
            )
            for fingerprint in (self.model.fingerprint, self.model.fingerprint + ":sentence")
        )
        self.embedder.stats = stats
        # lazy: the tokenizers load on the first chunk (a no-op sync never needs them)
        self.ctx, tokenizer = build_context(
            cfg, embed=self.sentence_embedder.embed_texts, lazy=True
        )
        self.rules = RuleSet(cfg.rules, self.ctx, tokenizer, self.model.fingerprint)
        self.rule_warnings = self.rules.fit_warnings(self.ctx)

    def embed_model(self) -> Any:
        """The embedding callable, made on first use (thread-safe).

        Each call counts as a use of the model (:attr:`last_use`).
        """
        self.last_use = time.monotonic()
        with self._lock:
            if self._embed_model is None:
                self._embed_model = self._new_model(self)
            return self._embed_model

    @property
    def loaded(self) -> bool:
        """Whether the model's weights are loaded."""
        m = self._embed_model
        return m is not None and bool(getattr(m, "loaded", True))

    def load(self) -> bool:
        """Load the model's weights now (the daemon preloads them in the background).

        Returns:
            ``True`` when weights were loaded, ``False`` when there was nothing to load.
        """
        model = self.embed_model()
        load = getattr(model, "load", None)
        if load is None or getattr(model, "loaded", True):
            return False
        load()
        return True

    def unload(self) -> bool:
        """Let the model's weights go (the next text loads them again).

        Returns:
            Whether weights were loaded (an injected callable without ``unload``: no).
        """
        model = self._embed_model
        unload = getattr(model, "unload", None)
        return bool(unload()) if unload is not None else False

    def describe(self) -> str:
        """One line naming the profile.

        See :func:`~ingestd.daemon.sync.profiles.settings.describe`.
        """
        return describe(self.settings)
