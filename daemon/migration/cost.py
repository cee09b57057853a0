"""What a migration to another profile costs, said before it starts.

Counted from the manifest and the embedding cache, without reading a file or opening
the vector store, so that ``ingestd migrate --dry-run`` answers beside a running daemon
(for a config the daemon has not loaded yet) and ``resync --dry-run`` writes nothing:

* the documents and chunks of the collection's current version (the manifest);
* its distinct chunk texts whose vector by the new model is already in the embedding
  cache (a migration back to a model used before reuses them), and the rest: to embed;
* ``exact``: whether the new profile chunks as the current one does (the counts are
  then those the migration meets), or the chunking changes too (tokenizer,
  ``fit_model``, the model's tokenizer or limit, a rule of the semantic chunker, which
  splits where the model's sentence vectors say): the counts are then of the current
  chunks, an estimate;
* disk: the new version is built beside the current one. In embedded mode its size is
  estimated from the current version's true disk cost (the engine's spec counts the
  blocks its files take), and both models are held in memory until the switch, as are
  both versions by an engine that holds its points in memory (the spec says how much).
  The embedding cache grows by one vector per chunk embedded.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ingestd.daemon.config import Config
from ingestd.daemon.statedir import dir_bytes
from ingestd.daemon.sync.profiles.profile import config_for, differences, model_of
from ingestd.daemon.sync.profiles.settings import describe
from ingestd.store.manifest.manifest import Manifest

__all__ = ["MigrationCost", "estimate"]

#: Bytes of one cache row besides its vector (key, hash, index entry), measured roughly.
CACHE_ROW_OVERHEAD = 160


@dataclass
class MigrationCost:
    """The cost of migrating one collection to another profile.

    Attributes:
        collection: the collection.
        changes: what differs, one ``what: old -> new`` line each.
        previous: the profile of the current version (as recorded).
        target: the configured profile.
        documents: documents of the current version.
        chunks: points of the current version.
        texts: distinct chunk texts among them (each is embedded once).
        cached: texts whose vector by the new model is in the embedding cache.
        to_embed: texts the new model must embed (``texts - cached``).
        exact: the new profile chunks as the current one (else the counts estimate).
        embedded_mode: the store is qdrant-client's embedded mode (in memory).
        store_bytes: estimated size of the new version (embedded mode), else ``None``.
        memory_bytes: what the daemon holds more in memory meanwhile (embedded mode:
            the new version and the second model's weights), else ``None``.
        cache_bytes: growth of the embedding cache, in bytes.
    """

    collection: str
    changes: list[str]
    previous: dict[str, Any]
    target: dict[str, Any]
    documents: int = 0
    chunks: int = 0
    texts: int = 0
    cached: int = 0
    to_embed: int = 0
    exact: bool = True
    embedded_mode: bool = True
    store_bytes: int | None = None
    memory_bytes: int | None = None
    cache_bytes: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with ``summary`` (the log line)."""
        return {**asdict(self), "summary": self.summary()}

    def summary(self) -> str:
        """One log line: what changes, then the counts and the disk."""
        out = (
            f"collection {self.collection}: a new version for {'; '.join(self.changes)}: "
            f"{self.documents} documents, {self.chunks} chunks ({self.texts} distinct texts: "
            f"{self.to_embed} to embed, {self.cached} cached for the new model)"
        )
        if not self.exact:
            out += " (counted from the current chunks: the chunking changes too)"
        if self.store_bytes is not None:
            out += f"; about {_mb(self.store_bytes)} on disk beside the current version"
        out += f"; the embedding cache grows by about {_mb(self.cache_bytes)}"
        if self.embedded_mode and self.memory_bytes is not None:
            out += (
                f"; embedded mode holds both versions in memory until the switch, and "
                f"both models: about {_mb(self.memory_bytes)} more"
            )
        return out


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def chunking_key(cfg: Config) -> tuple[Any, ...]:
    """What decides the chunk boundaries of every document, besides the rules.

    Raises:
        ingestd.store.embedding.embedder.ModelNotFoundError: the model is not available locally.
    """
    info = model_of(cfg)
    fit = cfg.embedding.fit_model
    tok = None
    if (fit or cfg.tokenizer == "model") and info.tokenizer_json is not None:
        tok = hashlib.sha256(info.tokenizer_json.read_bytes()).hexdigest()
    semantic = any(r.chunker == "semantic" for r in cfg.rules)
    return (
        cfg.tokenizer,
        fit,
        tok,
        info.max_seq_length if fit else None,
        info.fingerprint if semantic else None,
    )


def estimate(
    cfg: Config,
    state_dir: Path,
    manifest: Manifest,
    collection: str,
    previous: dict[str, Any],
    target: dict[str, Any],
    cache: Any = None,
) -> MigrationCost:
    """The cost of migrating ``collection`` from profile ``previous`` to ``target``.

    Args:
        cfg: the configured config (rules, store, embedding cache location).
        state_dir: the state dir.
        manifest: the manifest (read only).
        collection: the collection.
        previous: the recorded profile of its current version.
        target: the configured profile.
        cache: the open embedding cache, or ``None`` to open ``embeddings.db`` if present.
    """
    from ingestd.store.embedding.cache import EmbeddingCache
    from ingestd.store.embedding.embedder import ModelNotFoundError

    cost = MigrationCost(collection, differences(previous, target), previous, target)
    hashes: set[str] = set()
    for s in manifest.sources():
        if s["collection"] != collection:
            continue
        cost.documents += manifest.counts(s["name"])["documents"]
        rows = manifest.chunks_of_source(s["name"])
        cost.chunks += sum(1 for r in rows.values() if not r.pending)
        hashes.update(r.chunk_hash for r in rows.values() if not r.pending)
    cost.texts = len(hashes)
    path = cfg.paths(state_dir).embeddings
    if cache is None and path.exists():
        opened = EmbeddingCache(path, cfg.embedding.cache_max_entries)
        try:
            cost.cached = len(opened.cached(str(target["model_fingerprint"]), list(hashes)))
        finally:
            opened.close()
    elif cache is not None:
        cost.cached = len(cache.cached(str(target["model_fingerprint"]), list(hashes)))
    cost.to_embed = cost.texts - cost.cached
    try:
        cost.exact = chunking_key(config_for(cfg, previous)) == chunking_key(cfg)
    except ModelNotFoundError:
        cost.exact = False
        cost.notes.append(f"the current version's {describe(previous)} is not found")
    dim_new, dim_old = int(target["dim"]), int(previous["dim"])
    cost.cache_bytes = cost.to_embed * (4 * dim_new + CACHE_ROW_OVERHEAD)
    from ingestd.store.vectors.engines import choose_engine, embedded, engine_spec

    cost.embedded_mode = embedded(cfg.qdrant)
    if cost.embedded_mode:
        paths = cfg.paths(state_dir)
        engine, _ = choose_engine(cfg.qdrant.engine, paths.engine_folders())
        spec = engine_spec(engine)
        current = spec.collection_folders(paths.engine_folder(engine), collection)
        if current:
            now = sum(spec.disk_bytes(p) for p in current)
            cost.store_bytes = max(0, now + 4 * cost.chunks * (dim_new - dim_old))
            model_dir = model_of(cfg).path
            weights = dir_bytes(model_dir, follow_symlinks=True) if model_dir else 0
            cost.memory_bytes = spec.memory_bytes(cost.store_bytes) + weights
    return cost
