"""Per-path chunking rules: first match wins, a default rule closes the list.

A rule's fingerprint hashes the chunker name and version, its validated params, the
tokenizer and the embedding model's fingerprint (DESIGN.md point 2): a document whose
rule fingerprint changed is re-chunked even when its bytes did not.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec

from ingestd.chunkers.base import ChunkContext, Chunker, EmbedFn, Sizer
from ingestd.chunkers.registry import chunker_class
from ingestd.chunkers.tokenizers import ModelSizer, TiktokenSizer
from ingestd.store.sparse import contract as bm25_contract

from .config import Config, RuleConfig, default_rules

__all__ = ["Rule", "RuleSet", "build_context"]


@dataclass(frozen=True)
class Rule:
    """A compiled rule.

    Attributes:
        index: position in the rule list.
        name: payload ``rule``.
        config: the rule as configured.
        fingerprint: sha256 hex of what decides this rule's chunks and payload (name,
            chunker, version, params, tokenizer, model fingerprint, model fit, the
            chunkers' code) and sparse vectors (the BM25 contract).
        chunker: the strategy instance.
    """

    index: int
    name: str
    config: RuleConfig
    fingerprint: str
    chunker: Chunker
    spec: pathspec.GitIgnoreSpec

    @property
    def chunker_name(self) -> str:
        """The strategy's registered name."""
        return self.config.chunker


def build_context(cfg: Config, embed: EmbedFn | None = None) -> tuple[ChunkContext, str]:
    """The chunking context for ``cfg`` and the tokenizer's fingerprint name.

    ``tokenizer: model`` counts budgets in the embedding model's word pieces; any other
    value is a tiktoken encoding name (loaded offline).

    Raises:
        ingestd.chunkers.tokenizers.TokenizerError: the tiktoken encoding is not bundled.
        ingestd.store.embedder.ModelNotFoundError: the model is not available locally.
    """
    from ingestd.store.embedder import model_info

    info = model_info(cfg.embedding.model)
    model_sizer: Sizer | None = None
    if info.tokenizer_json is not None:
        model_sizer = ModelSizer(info.tokenizer_json, name=info.fingerprint[:16])
    sizer: Sizer
    if cfg.tokenizer == "model":
        if model_sizer is None:
            raise ValueError(f"tokenizer: model needs a tokenizer.json in {info.path}")
        sizer = model_sizer
    else:
        sizer = TiktokenSizer(cfg.tokenizer)
    ctx = ChunkContext(
        sizer=sizer,
        model_sizer=model_sizer if cfg.embedding.fit_model else None,
        model_max_tokens=max(1, info.max_seq_length - 2),
        embed=embed,
    )
    return ctx, sizer.name


class RuleSet:
    """The ordered rules of a config, compiled.

    Args:
        rules: rules as configured (the default rules are appended as a fallback when
            no rule matches everything).
        ctx: the chunking context.
        tokenizer: tokenizer name for fingerprints.
        model_fingerprint: the embedding model's fingerprint.

    Raises:
        ValueError: a rule's params are invalid for its chunker.
    """

    def __init__(
        self,
        rules: Sequence[RuleConfig],
        ctx: ChunkContext,
        tokenizer: str,
        model_fingerprint: str,
    ) -> None:
        all_rules = list(rules)
        if not any("*" in r.match or "**" in r.match for r in all_rules):
            all_rules.append(default_rules()[-1])
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
                    "fit_model": ctx.model_sizer is not None,
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
                    chunker=cls(options, ctx),
                    spec=pathspec.GitIgnoreSpec.from_lines(r.match),
                )
            )

    def match(self, path: str) -> Rule:
        """The first rule matching POSIX relative ``path`` (the last rule always matches)."""
        for rule in self.rules:
            if rule.spec.match_file(path):
                return rule
        return self.rules[-1]

    def fit_warnings(self, ctx: ChunkContext) -> list[str]:
        """Rules whose budget does not fit the embedding model, one message each.

        Uses the ratio measured on md-docs, about 1.22 all-MiniLM-L6-v2 word pieces per
        cl100k token, to estimate a budget's length in model word pieces.
        """
        out = []
        for r in self.rules:
            budget = getattr(r.chunker.options, "max_tokens", None)
            if not isinstance(budget, int):
                continue
            approx = budget if ctx.sizer is ctx.model_sizer else int(budget * 1.22)
            if approx <= ctx.model_max_tokens:
                continue
            if ctx.model_sizer is None:
                out.append(
                    f"rule {r.name!r}: max_tokens {budget} is about {approx} model word pieces, "
                    f"over the model's {ctx.model_max_tokens}: the model will silently drop the "
                    "rest of long chunks (set embedding.fit_model: true or lower max_tokens)"
                )
            else:
                out.append(
                    f"rule {r.name!r}: max_tokens {budget} is about {approx} model word pieces; "
                    f"chunks are capped at the model's {ctx.model_max_tokens} instead"
                )
        return out

    def unmatched(self, paths: Sequence[str]) -> list[str]:
        """Names of rules that match none of ``paths`` first (candidates for removal)."""
        used = {self.match(p).name for p in paths}
        return [r.name for r in self.rules if r.name not in used]


@functools.cache
def chunkers_code_fingerprint() -> str:
    """sha256 of the source of the installed ``ingestd.chunkers`` package.

    Part of every rule fingerprint, so that an upgrade that changes how text is chunked
    re-chunks documents even when nobody remembered to bump a chunker's ``version``:
    ``resync`` and ``verify`` then always agree. Unchanged chunk texts keep their ids
    and vectors, so an upgrade costs chunking and payload updates, not embeddings.
    """
    import ingestd.chunkers as pkg

    h = hashlib.sha256()
    for f in sorted(Path(pkg.__file__).parent.glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
