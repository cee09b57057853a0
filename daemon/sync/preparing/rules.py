"""Per-path chunking rules: first match wins, a default rule closes the list.

A rule's fingerprint hashes the chunker name and version, its validated params, the
tokenizer and the embedding model's fingerprint (DESIGN.md point 2): a document whose
rule fingerprint changed is re-chunked even when its bytes did not.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pathspec

from ingestd.chunkers.base import ChunkContext, Chunker, ChunkerOptions, EmbedFn, Sizer
from ingestd.chunkers.readers.document import Reader
from ingestd.chunkers.registry import chunker_class
from ingestd.daemon.config import Config, RuleConfig, default_rules
from ingestd.store.search.sparse import contract as bm25_contract

if TYPE_CHECKING:
    from ingestd.store.embedding.model import ModelInfo

__all__ = ["REMOTE_ENCODING", "LazyContext", "Rule", "RuleSet", "build_context"]


class LazyContext:
    """A :class:`ChunkContext` built on first use.

    Rule fingerprints and fit warnings need only what a context *is* (the budget
    tokenizer's name, whether chunks are held to the model, the model's limit), not
    the tokenizers themselves: loading tiktoken's ``cl100k_base`` costs about 0.3 s,
    which a no-op ``resync`` (every file skipped by the stat fast path) never needs.

    Args:
        build: makes the context (called at most once).
        tokenizer: the budget sizer's name (``tiktoken:cl100k_base``, ``model:...``).
        fit_model: chunks are held to the model's length (``model_sizer`` is set).
        model_max_tokens: word pieces the model reads, special tokens excluded.
        budget_in_model_tokens: budgets count the model's own word pieces.

    Raises:
        RuntimeError: from :meth:`get`, when the built context contradicts these facts.
    """

    def __init__(
        self,
        build: Callable[[], ChunkContext],
        *,
        tokenizer: str,
        fit_model: bool,
        model_max_tokens: int,
        budget_in_model_tokens: bool,
    ) -> None:
        self._build = build
        self._ctx: ChunkContext | None = None
        self._lock = threading.Lock()  # documents may be chunked on a worker thread
        self.tokenizer = tokenizer
        self.fit_model = fit_model
        self.model_max_tokens = model_max_tokens
        self.budget_in_model_tokens = budget_in_model_tokens

    @classmethod
    def of(cls, ctx: ChunkContext, tokenizer: str) -> LazyContext:
        """Wrap a context that is already built."""
        lazy = cls(
            lambda: ctx,
            tokenizer=tokenizer,
            fit_model=ctx.model_sizer is not None,
            model_max_tokens=ctx.model_max_tokens,
            budget_in_model_tokens=ctx.sizer is ctx.model_sizer,
        )
        lazy._ctx = ctx
        return lazy

    @property
    def built(self) -> bool:
        """Whether the context has been built."""
        return self._ctx is not None

    def get(self) -> ChunkContext:
        """The context, built on the first call."""
        with self._lock:
            if self._ctx is None:
                ctx = self._build()
                fits = ctx.model_sizer is not None
                if ctx.sizer.name != self.tokenizer or fits != self.fit_model:
                    raise RuntimeError(
                        f"chunking context {ctx.sizer.name!r} (fit_model {fits}) differs "
                        f"from the one fingerprinted, {self.tokenizer!r} "
                        f"(fit_model {self.fit_model})"
                    )
                self._ctx = ctx
            return self._ctx

    @property
    def sizer(self) -> Sizer:
        """The budget tokenizer (builds the context)."""
        return self.get().sizer

    @property
    def model_sizer(self) -> Sizer | None:
        """The model's tokenizer, or ``None`` with ``fit_model: false`` (builds the context)."""
        return self.get().model_sizer


def _tokenizer_name(cfg: Config, info: ModelInfo) -> str:
    """The budget sizer's name, as :class:`TiktokenSizer`/:class:`ModelSizer` spell it.

    Raises:
        ValueError: ``tokenizer: model`` with a model that has no ``tokenizer.json``.
        ingestd.chunkers.sizing.tokenizers.TokenizerError: the tiktoken encoding is not bundled.
    """
    if cfg.tokenizer == "model":
        if info.endpoint is not None:
            raise ValueError(
                f"tokenizer: model needs the model's tokenizer.json, which the {info.backend} "
                f"backend's model {info.name!r} has not here: name a tiktoken encoding "
                f"({REMOTE_ENCODING})"
            )
        if info.tokenizer_json is None:
            raise ValueError(f"tokenizer: model needs a tokenizer.json in {info.path}")
        # named after the model's files: the same tokenizer whichever backend runs them
        return f"model:{info.files_fingerprint[:16]}"
    _check_tiktoken(cfg.tokenizer)
    return f"tiktoken:{cfg.tokenizer}"


@functools.cache
def _check_tiktoken(name: str) -> None:
    """Fail now, not at the first chunk, when the encoding has no offline copy."""
    import tiktoken

    from ingestd.chunkers.sizing.tokenizers import TokenizerError

    offline = name if name.endswith("_offline") else f"{name}_offline"
    names = tiktoken.list_encoding_names()
    if offline not in names:
        available = sorted(n.removesuffix("_offline") for n in names if n.endswith("_offline"))
        raise TokenizerError(
            f"tiktoken encoding {name!r} has no offline copy; available offline: "
            f"{', '.join(available) or 'none'}"
        )


#: How chunks are measured against a remote model's limit (``embedding.max_tokens``):
#: its own tokenizer is not known here. ``cl100k_base`` is the encoding of OpenAI's
#: embedding models; for another model it is an estimate (all-MiniLM-L6-v2's word
#: pieces run 1.1-1.3 per ``cl100k_base`` token on the dev corpora, up to 1.9 on one
#: page), so ``max_tokens`` is set below the model's limit by that margin (see
#: docs/guides/remote-embedding.md).
REMOTE_ENCODING = "cl100k_base"


def _make_context(cfg: Config, info: ModelInfo, embed: EmbedFn | None) -> ChunkContext:
    from ingestd.chunkers.sizing.tokenizers import ModelSizer, TiktokenSizer

    model_sizer: Sizer | None = None
    if info.tokenizer_json is not None:
        model_sizer = ModelSizer(info.tokenizer_json, name=info.files_fingerprint[:16])
    elif info.endpoint is not None:  # the endpoint's tokenizer is unknown: see REMOTE_ENCODING
        model_sizer = TiktokenSizer(REMOTE_ENCODING)
    sizer: Sizer
    if cfg.tokenizer == "model":
        assert model_sizer is not None  # checked by _tokenizer_name
        sizer = model_sizer
    else:
        sizer = TiktokenSizer(cfg.tokenizer)
    return ChunkContext(
        sizer=sizer,
        model_sizer=model_sizer if cfg.embedding.fit_model else None,
        model_max_tokens=max(1, info.max_seq_length - 2),
        embed=embed,
    )


def lazy_context(cfg: Config, info: ModelInfo, embed: EmbedFn | None = None) -> LazyContext:
    """The chunking context of ``cfg``, built on first use (see :class:`LazyContext`).

    Raises:
        ValueError: ``tokenizer: model`` with a model that has no ``tokenizer.json``.
        ingestd.chunkers.sizing.tokenizers.TokenizerError: the tiktoken encoding is not bundled.
    """
    return LazyContext(
        lambda: _make_context(cfg, info, embed),
        tokenizer=_tokenizer_name(cfg, info),
        fit_model=cfg.embedding.fit_model
        and (info.tokenizer_json is not None or info.endpoint is not None),
        model_max_tokens=max(1, info.max_seq_length - 2),
        budget_in_model_tokens=cfg.tokenizer == "model",
    )


def build_context(
    cfg: Config, embed: EmbedFn | None = None, *, lazy: bool = False
) -> tuple[Any, str]:
    """The chunking context for ``cfg`` and the tokenizer's fingerprint name.

    ``tokenizer: model`` counts budgets in the embedding model's word pieces; any other
    value is a tiktoken encoding name (loaded offline).

    Args:
        cfg: the config.
        embed: embedding callable for the semantic strategy.
        lazy: return a :class:`LazyContext` that loads the tokenizers on first use
            (the engine: a no-op sync never chunks); else a built :class:`ChunkContext`.

    Raises:
        ingestd.chunkers.sizing.tokenizers.TokenizerError: the tiktoken encoding is not bundled.
        ingestd.store.embedding.embedder.ModelNotFoundError: the model is not available locally.
    """
    from ingestd.store.embedding.embedder import model_info

    e = cfg.embedding
    info = model_info(e.model, e.backend, endpoint=e.endpoint, prompts=e.prompts)
    ctx = lazy_context(cfg, info, embed)
    return (ctx if lazy else ctx.get()), ctx.tokenizer


@dataclass(frozen=True)
class Rule:
    """A compiled rule; its chunker is built on first use.

    Attributes:
        index: position in the rule list.
        name: payload ``rule``.
        config: the rule as configured.
        fingerprint: sha256 hex of what decides this rule's chunks and payload (name,
            chunker, version, params, tokenizer, model fingerprint, model fit, the
            chunkers' code) and sparse vectors (the BM25 contract).
        options: the strategy's validated options.
        spec: the compiled ``match`` globs.
        builtin: a default rule (not written by the user): no warnings about it.
    """

    index: int
    name: str
    config: RuleConfig
    fingerprint: str
    options: ChunkerOptions
    spec: pathspec.GitIgnoreSpec
    builtin: bool = False
    context: LazyContext | None = field(default=None, repr=False, compare=False)

    @property
    def chunker_name(self) -> str:
        """The strategy's registered name."""
        return self.config.chunker

    @property
    def reader(self) -> Reader:
        """The reader of the rule's files (its strategy's, with its options); no tokenizer."""
        return chunker_class(self.config.chunker).reader(self.options)

    @functools.cached_property
    def chunker(self) -> Chunker:
        """The strategy instance (built, with the tokenizers, on first use)."""
        if self.context is None:
            raise RuntimeError(f"rule {self.name!r} has no chunking context")
        return chunker_class(self.config.chunker)(self.options, self.context.get())


class RuleSet:
    """The ordered rules of a config, compiled.

    Args:
        rules: rules as configured (the default rules are appended as a fallback when
            no rule matches everything).
        ctx: the chunking context, built or lazy (:func:`build_context`).
        tokenizer: tokenizer name for fingerprints.
        model_fingerprint: the embedding model's fingerprint.

    Raises:
        ValueError: a rule's params are invalid for its chunker.
    """

    def __init__(
        self,
        rules: Sequence[RuleConfig],
        ctx: ChunkContext | LazyContext,
        tokenizer: str,
        model_fingerprint: str,
    ) -> None:
        self.context = ctx if isinstance(ctx, LazyContext) else LazyContext.of(ctx, tokenizer)
        all_rules = list(rules)
        if not any("*" in r.match or "**" in r.match for r in all_rules):
            all_rules.append(default_rules()[-1])
        defaults = default_rules()
        names = [r.name or r.chunker for r in all_rules]
        self.rules: list[Rule] = []
        for i, r in enumerate(all_rules):
            name = r.name or (r.chunker if names.count(r.chunker) == 1 else f"{r.chunker}-{i}")
            cls = chunker_class(r.chunker)
            options = cls.Options.model_validate(dict(r.params))
            fp = _fingerprint(
                {
                    "rule": name,  # the payload carries it
                    "chunker": r.chunker,
                    "version": cls.version,
                    "params": options.model_dump(mode="json"),
                    "tokenizer": tokenizer,
                    "model": model_fingerprint,
                    "fit_model": self.context.fit_model,
                    "code": chunkers_code_fingerprint(),
                    "bm25": bm25_contract(),  # sparse vectors are part of each point
                }
            )
            self.rules.append(
                Rule(
                    index=i,
                    name=name,
                    config=r,
                    fingerprint=fp,
                    options=options,
                    spec=pathspec.GitIgnoreSpec.from_lines(r.match),
                    builtin=r in defaults,
                    context=self.context,
                )
            )

    def match(self, path: str) -> Rule:
        """The first rule matching POSIX relative ``path`` (the last rule always matches)."""
        for rule in self.rules:
            if rule.spec.match_file(path):
                return rule
        return self.rules[-1]

    def fit_warnings(self, ctx: ChunkContext | LazyContext | None = None) -> list[str]:
        """Rules the user wrote whose budget does not fit the embedding model, one message each.

        Built-in default rules are left out: their budgets are the project's choice, and
        chunks are capped at the model's limit anyway. Uses the ratio measured on
        md-docs, about 1.22 all-MiniLM-L6-v2 word pieces per cl100k token, to estimate a
        budget's length in model word pieces. Loads no tokenizer.

        Args:
            ctx: ignored (the rule set's own context is used); kept for callers.
        """
        c = self.context
        out = []
        for r in self.rules:
            budget = getattr(r.options, "max_tokens", None)
            if r.builtin or not isinstance(budget, int):
                continue
            approx = budget if c.budget_in_model_tokens else int(budget * 1.22)
            if approx <= c.model_max_tokens:
                continue
            if not c.fit_model:
                out.append(
                    f"rule {r.name!r}: max_tokens {budget} is about {approx} model word pieces, "
                    f"over the model's {c.model_max_tokens}: the model will silently drop the "
                    "rest of long chunks (set embedding.fit_model: true or lower max_tokens)"
                )
            else:
                out.append(
                    f"rule {r.name!r}: max_tokens {budget} is about {approx} model word pieces; "
                    f"chunks are capped at the model's {c.model_max_tokens} instead"
                )
        return out

    def unmatched(self, paths: Sequence[str]) -> list[str]:
        """Names of rules the user wrote that match none of ``paths`` first.

        Candidates for removal; built-in default rules are never listed.
        """
        used = {self.match(p).name for p in paths}
        return [r.name for r in self.rules if r.name not in used and not r.builtin]


@functools.cache
def chunkers_code_fingerprint() -> str:
    """sha256 hex of the source of the installed ``ingestd.chunkers`` package.

    Part of every rule fingerprint, so that an upgrade that changes how text is chunked
    re-chunks documents even when nobody remembered to bump a chunker's ``version``:
    ``resync`` and ``verify`` then always agree. Unchanged chunk texts keep their ids
    and vectors, so an upgrade costs chunking and payload updates, not embeddings.
    Computed once per process (see :func:`source_tree_fingerprint`).
    """
    import ingestd.chunkers as pkg

    return source_tree_fingerprint(Path(pkg.__file__).parent)


def source_tree_fingerprint(root: Path) -> str:
    """sha256 hex of every ``*.py`` file under ``root``, each under its relative path.

    Subpackages count as much as the top level (the readers, strategies, packing and
    sizing all decide chunk text), and a module moved or renamed changes the hash.
    """
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
