"""One run of ``ingestd eval``: index a corpus per rule set, search, rank the hits.

For each rule set, an engine of its own indexes the corpus from scratch into the
collection ``eval-<run>-<i>`` (:mod:`ingestd.daemon.evaluation.collections`), with a
manifest of its own in a scratch folder and the embedding cache of the state dir (so a
text embedded before is never embedded again, and a second run of the same rules
embeds nothing). Every question is then searched in each mode with the Query API call
of ``ingestd search``, and the first path and span hits among the top
:data:`~ingestd.daemon.evaluation.scoring.DEPTH` are ranked
(:func:`~ingestd.daemon.evaluation.scoring.rank_hits`); the distinct pages of the top
:data:`PAGE_HITS` hits, by page score as passages order them
(:func:`ingestd.store.search.pages.page_scores`), are kept for the page-level metrics
(:mod:`~ingestd.daemon.evaluation.pages`). The collection is dropped as soon as its
rule set is scored, and in any case when the run ends (done, failed, cancelled, or the
daemon stopping).

An :class:`Evaluation` borrows a *host* engine's vector store, embedding model and
checkpoint hook: the daemon's engine, or one on a scratch state dir
(:mod:`ingestd.daemon.evaluation.runs`). Nothing of the real state is written but the
embedding cache: no real collection, and no manifest row (the eval source,
``eval:<label>``, lives in the scratch manifests).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ingestd.chunkers.errors import IngestdError
from ingestd.daemon.config import ManifestConfig, SourceConfig
from ingestd.daemon.engine import Engine
from ingestd.daemon.evaluation.collections import EvalCollections, collection_name
from ingestd.daemon.evaluation.pages import PAGE_DEPTH, pages_of
from ingestd.daemon.evaluation.questions import Question
from ingestd.daemon.evaluation.rulesets import LabeledRules
from ingestd.daemon.evaluation.scoring import DEPTH, rank_hits
from ingestd.daemon.sources.local import LocalSourceConfig
from ingestd.daemon.sync.types import SyncProgress
from ingestd.store.search.pages import page_scores
from ingestd.store.search.query import Mode
from ingestd.store.vectors.base import VectorStore

__all__ = [
    "MODES",
    "PAGE_HITS",
    "EvalCancelled",
    "EvalError",
    "EvalPlan",
    "EvalProgress",
    "Evaluation",
]

logger = logging.getLogger(__name__)

#: Search modes, in the order the table shows them by default.
MODES = ("hybrid", "dense", "sparse")
#: Hits each search asks for: their distinct pages make the page-level ranking
#: (:data:`~ingestd.daemon.evaluation.pages.PAGE_DEPTH` pages; ``search.candidates``
#: by default, so the top hits are those of a search of ``k`` 10).
PAGE_HITS = 50
#: Searches between two progress reports.
_REPORT_EVERY = 5


class EvalError(IngestdError, RuntimeError):
    """An evaluation cannot run (e.g. the daemon cannot read the corpus)."""


class EvalCancelled(Exception):
    """The evaluation was cancelled (Ctrl-C, ``eval-cancel``) or the daemon is stopping."""


@dataclass
class EvalProgress:
    """Where a run stands; reported after every write slice and every few searches.

    Attributes:
        run: the run's id.
        rule_set: label of the rule set in flight.
        index: its position among the rule sets (0-based).
        rule_sets: number of rule sets.
        phase: ``indexing`` or ``searching``.
        sync: the indexing's progress (documents, chunks embedded, time left).
        searched: searches done for this rule set.
        searches: searches to do for this rule set (questions x modes).
    """

    run: str
    rule_set: str = ""
    index: int = 0
    rule_sets: int = 0
    phase: str = "indexing"
    sync: SyncProgress | None = None
    searched: int = 0
    searches: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields; ``sync`` with its ``eta_seconds`` and ``elapsed_seconds``."""
        out: dict[str, Any] = {k: v for k, v in self.__dict__.items() if k != "sync"}
        out["sync"] = None
        if self.sync is not None:
            elapsed = time.monotonic() - self.sync.started
            out["sync"] = {**self.sync.as_dict(), "elapsed_seconds": elapsed}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalProgress:
        """The inverse of :meth:`as_dict` (the ETA is recomputed from the elapsed time)."""
        fields = dict(data)
        sync = fields.pop("sync", None)
        out = cls(**fields)
        if sync:
            s = dict(sync)
            elapsed = float(s.pop("elapsed_seconds", 0.0))
            s.pop("eta_seconds", None)
            out.sync = SyncProgress(**s, started=time.monotonic() - elapsed)
        return out


class _Lent:
    """A vector store lent to an engine: every call passes through, ``close`` does not."""

    def __init__(self, store: VectorStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def close(self) -> None:
        """Leave the store open: it belongs to the host."""


@dataclass(frozen=True)
class EvalPlan:
    """What an evaluation measures, wherever it runs (here or in the daemon).

    Attributes:
        corpus: the corpus root. It is indexed with the include/exclude globs of the
            configured source at that root, if there is one, else with the defaults.
        questions: the questions, their answers located.
        rule_sets: the rule sets, in table order.
        modes: the search modes, in table order.
    """

    corpus: Path
    questions: Sequence[Question]
    rule_sets: Sequence[LabeledRules]
    modes: Sequence[str]


class Evaluation:
    """One run of ``ingestd eval`` on a host engine.

    Args:
        host: the engine whose vector store, embedding model and checkpoint hook the
            run borrows (the daemon's, or a scratch one: see the module docstring).
        plan: the corpus, questions, rule sets and modes.
        cache_path: the embedding cache file (the state dir's ``embeddings.db``).
        scratch: a folder for the engines' manifests (the caller removes it).
        collections: where the eval collections are listed and dropped (default: the
            host's store, no ledger).
        run_id: 8 hex digits naming the collections; default random.
        progress: called with an :class:`EvalProgress` as the run advances.

    Attributes:
        id: the run id.
        cancel: set it to end the run at its next checkpoint (:class:`EvalCancelled`).
        state: the latest progress.
    """

    def __init__(
        self,
        host: Engine,
        plan: EvalPlan,
        *,
        cache_path: Path,
        scratch: Path,
        collections: EvalCollections | None = None,
        run_id: str | None = None,
        progress: Callable[[EvalProgress], None] | None = None,
    ) -> None:
        self.host = host
        self.corpus = Path(os.path.realpath(plan.corpus))
        self.questions = list(plan.questions)
        self.rule_sets = list(plan.rule_sets)
        self.modes = cast("list[Mode]", list(plan.modes))  # checked below
        self.cache_path = Path(cache_path)
        self.scratch = Path(scratch)
        self.collections = collections or EvalCollections(host.resources.store, None)
        self.id = run_id or secrets.token_hex(4)
        self.cancel = threading.Event()
        self.state = EvalProgress(self.id, rule_sets=len(self.rule_sets))
        self._progress = progress
        unknown = [m for m in self.modes if m not in MODES]
        if unknown or not self.modes:
            raise ValueError(f"modes must be among {', '.join(MODES)} (got {self.modes})")

    # -- the run ----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Index, search and rank for each rule set; drop every eval collection.

        Returns:
            ``{"run", "corpus", "modes", "questions" (ids), "questions_embedded",
            "rule_sets": [...]}``; per rule set ``label``, ``documents``, ``chunks``,
            ``failed`` (path -> error), ``unreadable`` (paths), ``embedded``, ``reused``
            (chunks), ``unindexed`` (ids of questions whose file has no chunks),
            ``split`` (ids of questions whose answer no single searchable chunk covers),
            ``ranks``: mode -> ``[path_rank, span_rank]`` per question (1-based,
            ``null`` past rank :data:`~ingestd.daemon.evaluation.scoring.DEPTH`; both
            ``null`` for a question without a verbatim answer) and ``pages``: mode ->
            each question's distinct pages, best first (at most
            :data:`~ingestd.daemon.evaluation.pages.PAGE_DEPTH`).

        Raises:
            EvalCancelled: :attr:`cancel` was set, or the host is stopping.
            EvalError: the corpus cannot be read, or no document of it could be indexed
                (the first error is given: a broken model, say).
        """
        out: dict[str, Any] = {
            "run": self.id,
            "corpus": str(self.corpus),
            "modes": self.modes,
            "questions": [q.id for q in self.questions],
            "questions_embedded": 0,
            "rule_sets": [],
        }
        qvecs: list[Any] | None = None
        for i, rs in enumerate(self.rule_sets):
            collection = collection_name(self.id, i)
            self.collections.register(collection)
            try:
                engine = self._engine(rs, collection, i)
                try:
                    self.state = EvalProgress(self.id, rs.label, i, len(self.rule_sets))
                    entry = self._index(engine, rs)
                    if qvecs is None and any(m != "sparse" for m in self.modes):
                        qvecs, out["questions_embedded"] = self._embed_questions(engine)
                    self._coverage(engine, collection, entry)
                    entry["ranks"], entry["pages"] = self._search(engine, collection, qvecs)
                    out["rule_sets"].append(entry)
                finally:
                    engine.close()
            finally:
                self.collections.drop(collection)
        return out

    def _engine(self, rs: LabeledRules, collection: str, i: int) -> Engine:
        name = f"eval:{rs.label}"
        source: SourceConfig = LocalSourceConfig(name=name, root=self.corpus, collection=collection)
        for s in self.host.cfg.sources:
            if Path(os.path.realpath(s.root)) == self.corpus:  # the user's globs for this tree
                source = s.model_copy(update={"name": name, "collection": collection})
        cfg = self.host.cfg.model_copy(
            update={
                "sources": (source,),
                "rules": rs.rules,
                "manifest": ManifestConfig(),  # a scratch SQLite manifest, never the real one
                "state_dir": None,
            }
        )
        engine = Engine(
            cfg,
            self.scratch / f"rules-{i}",
            # its prompts are added by each engine
            embed_model=self.host.profiles.profile.run_model,
            store=_Lent(self.host.resources.store),
            cache_path=self.cache_path,
        )
        engine.checkpoints.stop = self.cancel
        engine.checkpoints.on_checkpoint = self._checkpoint
        return engine

    def _checkpoint(self, serve_changes: bool) -> None:
        """The eval engines' checkpoint: the host's (pings, searches), then a stop check."""
        if self.host.checkpoints.on_checkpoint is not None:
            self.host.checkpoints.on_checkpoint(serve_changes)
        if self.host.checkpoints.stop.is_set():
            self.cancel.set()

    def _report(self) -> None:
        if self._progress is not None:
            self._progress(self.state)

    def _raise_if_cancelled(self) -> None:
        if self.cancel.is_set() or self.host.checkpoints.stop.is_set():
            why = "the daemon is stopping" if self.host.checkpoints.stop.is_set() else "cancelled"
            raise EvalCancelled(f"evaluation {why}; its collections were dropped")

    def _index(self, engine: Engine, rs: LabeledRules) -> dict[str, Any]:
        from ingestd.daemon.sync.types import SyncInterrupted

        source = next(iter(engine.context.sources))

        def progress(p: SyncProgress) -> None:
            self.state.sync = p
            self._report()

        try:
            res = engine.sync(source, progress=progress)
        except SyncInterrupted:
            res = None
        if res is None or res.interrupted:
            self._raise_if_cancelled()
            raise EvalCancelled("evaluation interrupted")
        if res.root_missing:
            raise EvalError(f"the corpus {self.corpus} is not a folder this process can read")
        counts = engine.resources.manifest.counts(source)
        failed = dict(engine.resources.manifest.failed(source))
        if failed and counts["documents"] == len(failed):
            path, error = next(iter(failed.items()))
            raise EvalError(
                f"no document of {self.corpus} could be indexed with {rs.label}; "
                f"{len(failed)} failed, the first ({path}) with: {error}"
            )
        return {
            "label": rs.label,
            "documents": counts["documents"],
            "chunks": counts["chunks"],
            "failed": failed,
            "unreadable": sorted(res.retry),
            "embedded": res.embedded,
            "reused": res.reused,
        }

    def _embed_questions(self, engine: Engine) -> tuple[list[Any], int]:
        """Question vectors, through the embedding cache; and how many the model made.

        A model that embeds a query otherwise than a chunk (its query prompt, or its
        query input type) embeds the questions so, past the cache (which holds
        documents' vectors).
        """
        from ingestd.store.embedding.prompts import embed_queries
        from ingestd.store.vectors.ids import chunk_hash

        model = engine.profiles.profile.model
        if model.asymmetric:
            texts = [q.question for q in self.questions]
            vecs = (
                embed_queries(engine.profiles.profile.embed_model(), model, texts) if texts else []
            )
            return list(vecs), len(texts)
        _ = engine.resources.cache  # open it: questions asked before are not embedded again
        pairs = [(chunk_hash(q.question), q.question) for q in self.questions]
        before = engine.profiles.profile.embedder.stats.embedded
        vecs = engine.profiles.profile.embedder.vectors(pairs)
        return [vecs[h] for h, _ in pairs], engine.profiles.profile.embedder.stats.embedded - before

    def _coverage(self, engine: Engine, collection: str, entry: dict[str, Any]) -> None:
        """Questions whose file has no chunks, and answers no searchable chunk covers."""
        source = next(iter(engine.context.sources))
        docs = engine.resources.manifest.documents(source)
        unindexed, split = [], []
        for q in self.questions:
            if not q.has_answer:
                continue
            doc = docs.get(q.path)
            if doc is None or doc.state == "failed":
                unindexed.append(q.id)
                continue
            covering = [
                r.point_id
                for r in engine.resources.manifest.chunks(doc.id)
                if r.start_char <= q.start and r.end_char >= q.end
            ]
            found = engine.resources.store.retrieve(collection, covering) if covering else []
            if not any(not payload.get("is_parent") for _, payload, _ in found):
                split.append(q.id)
        entry["unindexed"], entry["split"] = unindexed, split

    def _search(
        self, engine: Engine, collection: str, qvecs: list[Any] | None
    ) -> tuple[dict[str, list[list[int | None]]], dict[str, list[list[str]]]]:
        from ingestd.daemon.sync.types import SyncInterrupted
        from ingestd.store.search.sparse import query_vector

        conf = engine.cfg.search
        sparse = [query_vector(q.question) for q in self.questions]
        self.state.phase, self.state.searches = "searching", len(self.modes) * len(sparse)
        self._report()
        ranks: dict[str, list[list[int | None]]] = {}
        pages: dict[str, list[list[str]]] = {}
        for mode in self.modes:
            got = ranks[mode] = []
            listed = pages[mode] = []
            for i, q in enumerate(self.questions):
                try:
                    engine.checkpoints.heartbeat()
                except SyncInterrupted:
                    self._raise_if_cancelled()
                    raise
                hits = engine.resources.store.search(
                    collection,
                    dense=qvecs[i] if qvecs is not None and mode != "sparse" else None,
                    sparse=sparse[i] if mode != "dense" else None,
                    limit=PAGE_HITS,
                    mode=mode,
                    rrf_k=conf.rrf_k,
                    candidates=conf.candidates,
                    fusion=conf.fusion,
                )
                by_page = page_scores((h.payload["path"], h.score) for h in hits)
                listed.append(pages_of((page for page, _ in by_page), PAGE_DEPTH))
                if not q.has_answer:
                    got.append([None, None])
                else:
                    r = rank_hits(
                        q,
                        (
                            (h.payload["path"], h.payload["start_char"], h.payload["end_char"])
                            for h in hits[:DEPTH]
                        ),
                    )
                    got.append([r.path, r.span])
                self.state.searched += 1
                if self.state.searched % _REPORT_EVERY == 0:
                    self._report()
        self._report()
        return ranks, pages
