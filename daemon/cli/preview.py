"""``ingestd chunk``: preview a file's chunks with the configured rules, no store needed."""

from __future__ import annotations

import logging
import os
import statistics
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ingestd.chunkers.registry import chunker_class
from ingestd.daemon.config import Config, RuleConfig, format_errors
from ingestd.daemon.readfile import read_file
from ingestd.daemon.sync.preparing.rules import RuleSet, build_context
from ingestd.store.vectors.ids import chunk_hash, point_ids

__all__ = ["locate", "preview"]

logger = logging.getLogger(__name__)


def _parse_params(params: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in params:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise ValueError(f"--param {p!r}: expected KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _rules_for(
    cfg: Config, chunker_name: str | None, rule_name: str | None, params: Sequence[str]
) -> list[RuleConfig]:
    """The configured rules, or one rule for ``--chunker`` with its ``--param`` options."""
    if chunker_name and rule_name:
        raise ValueError("--rule and --chunker cannot be combined: pick a rule or a chunker")
    if not chunker_name:
        if params:
            raise ValueError("--param needs --chunker")
        return list(cfg.rules)
    cls = chunker_class(chunker_name)
    options = _parse_params(params)
    try:
        cls.Options.model_validate(options)
    except ValidationError as exc:
        raise ValueError("\n".join(format_errors(exc, "--param"))) from None
    return [RuleConfig(name=chunker_name, match=("*",), chunker=chunker_name, params=options)]


def locate(
    cfg: Config,
    file: Path,
    known: Sequence[tuple[str, str]] = (),
    cwd: Path | None = None,
) -> tuple[str, str]:
    """``(source, path)`` of ``file`` as ``resync`` would record it.

    The source is the configured one, else one the state dir's manifest knows
    (``known``: ``(name, root)`` pairs), whose root holds the file; the deepest root
    wins. Else the current directory is the root, as for ``ingestd resync .``. A file
    outside all of them is placed under the file system's root (``/``), never under
    its own folder, which no ``resync`` of a tree would do; a warning says so.

    Args:
        cfg: the config (its sources).
        file: the file.
        known: sources recorded in the manifest.
        cwd: the current directory (default: :func:`os.getcwd`).
    """
    real = Path(os.path.realpath(file))
    roots = [(s.name, Path(s.root)) for s in cfg.sources]
    roots += [(name, Path(os.path.realpath(root))) for name, root in known]
    holding = [(name, root) for name, root in roots if real.is_relative_to(root)]
    if holding:
        name, root = max(holding, key=lambda nr: len(nr[1].parts))  # first of the deepest
        return name, real.relative_to(root).as_posix()
    base = Path(os.path.realpath(cwd if cwd is not None else os.getcwd()))
    if real.is_relative_to(base) and real != base:
        return str(base), real.relative_to(base).as_posix()
    anchor = Path(real.anchor)
    logger.warning(
        "%s is outside every known source and the current directory: its ids are "
        "those of a source at %s (run `ingestd chunk` from the folder you index)",
        file,
        anchor,
    )
    return str(anchor), real.relative_to(anchor).as_posix()


def preview(
    cfg: Config,
    file: Path,
    *,
    rule_name: str | None = None,
    chunker_name: str | None = None,
    params: Sequence[str] = (),
    stats: bool = False,
    known: Sequence[tuple[str, str]] = (),
) -> Iterator[dict[str, Any]]:
    """Chunk ``file`` and yield one JSON-ready object per chunk (or one stats object).

    Each object has ``id``, ``source``, ``path``, ``ordinal``, ``start_char``, ``end_char``,
    ``start_line``, ``end_line``, ``n_tokens``, ``n_model_tokens`` (with a model),
    ``heading_path`` (when the chunk has a heading above it), ``text`` (verbatim) and
    ``embed_text`` (what the model reads: the prefix, then the chunk's clean rendering,
    see :attr:`ingestd.chunkers.Chunk.embed_text`), plus ``prefix`` when there is one,
    ``parent_id``/``is_parent`` (``hierarchical``) and strategy extras
    (``start_token``/``end_token`` for ``token``, front-matter ``title``).

    ``source`` and ``path`` (and so ``id``) are those ``resync`` would give (see
    :func:`locate`; ``known`` lists the manifest's sources as ``(name, root)``).

    Raises:
        ValueError: unknown rule or chunker, bad params, or an undecodable file.
    """
    from ingestd.store.embedding.cache import CachedEmbedder
    from ingestd.store.embedding.embedder import load_embedder, model_info
    from ingestd.store.embedding.prompts import prompted

    e = cfg.embedding
    info = model_info(e.model, e.backend, endpoint=e.endpoint, prompts=e.prompts)
    lazy = load_embedder(info, device=e.device, threads=e.threads, cache_dir=e.cache_dir)
    embed = CachedEmbedder(
        lambda texts: lazy(prompted(info.document_prompt, texts)),
        info.fingerprint + ":sentence",
        None,
        chunk_hash,
    )
    ctx, tok = build_context(cfg, embed=embed.embed_texts)
    rules = _rules_for(cfg, chunker_name, rule_name, params)
    ruleset = RuleSet(rules, ctx, tok, info.fingerprint)
    source, rel = locate(cfg, file, known)
    if rule_name:
        matches = [r for r in ruleset.rules if r.name == rule_name]
        if not matches:
            raise ValueError(
                f"no rule named {rule_name!r}; rules: {', '.join(r.name for r in ruleset.rules)}"
            )
        rule = matches[0]
    else:
        rule = ruleset.match(rel)
    chunks = rule.chunker.chunk_document(rule.reader.read(read_file(file)))
    hashes = [chunk_hash(c.embed_text) for c in chunks]
    ids = point_ids(source, rel, hashes)
    model_counts = [ctx.model_sizer.count(c.embed_text) for c in chunks] if ctx.model_sizer else []
    if stats:
        toks = [c.n_tokens for c in chunks] or [0]
        out: dict[str, Any] = {
            "path": rel,
            "rule": rule.name,
            "chunker": rule.chunker_name,
            "count": len(chunks),
            "min_tokens": min(toks),
            "mean_tokens": round(statistics.fmean(toks), 1),
            "max_tokens": max(toks),
        }
        searched = [n for n, c in zip(model_counts, chunks, strict=False) if not c.is_parent]
        if searched:  # hierarchical parents are context for `search --expand`, not hits
            out["max_model_tokens"] = max(searched)
            out["over_model_limit"] = sum(n > ctx.model_max_tokens for n in searched)
        yield out
        return
    for i, c in enumerate(chunks):
        obj: dict[str, Any] = {
            "id": ids[i],
            "source": source,
            "path": rel,
            "ordinal": i,
            "start_char": c.start,
            "end_char": c.end,
            "start_line": c.start_line,
            "end_line": c.end_line,
            "n_tokens": c.n_tokens,
        }
        if model_counts:
            obj["n_model_tokens"] = model_counts[i]
        if c.heading_path:
            obj["heading_path"] = list(c.heading_path)
        if c.prefix:
            obj["prefix"] = c.prefix  # embedded before the text (the chunk hash covers it)
        if c.parent is not None:
            obj["parent_id"] = ids[c.parent]
        if c.is_parent:
            obj["is_parent"] = True
        for k, v in c.meta.items():
            obj.setdefault(k, v)
        obj["text"] = c.text
        obj["embed_text"] = c.embed_text  # what the model reads: prefix + clean rendering
        yield obj
