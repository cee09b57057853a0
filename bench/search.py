"""Search latency in embedded mode at md-docs scale: dense vs sparse vs hybrid, filters, ranks.

Builds (once, kept in ``--state``) an embedded Qdrant collection of md-docs exactly as
ingestd stores it: every chunk of the default rules (``Preparer.prepare``), its payload
with ``path_prefixes``, its BM25 sparse vector, and a deterministic fake dense vector
(latency does not depend on what the dense vectors mean; no model is loaded). Then
times :meth:`QdrantStore.search` for the first ``--questions`` md-docs questions,
``--repeat`` times, in each mode, without a filter, with a folder filter and with a
file filter, and unfiltered with ``ranks`` (what ``search --json`` asks for: both
rankings, as hybrid reads them), and prints the median and p95 in milliseconds and
each median's ratio to plain dense search measured in the same run. ``hybrid`` fuses
over the union of candidates (``search.fusion: union``); ``hybrid-rrf`` is plain RRF,
one engine call fewer.
Query embedding is not included (it is the same for dense and hybrid).

Usage::

    python bench/search.py                 # builds /tmp/bench-search on first use (~5 min)
    python bench/search.py --questions 80 --repeat 3 --state /tmp/other
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _provenance import provenance

HERE = Path(__file__).resolve().parent
CORPORA = HERE.parent.parent / "shared" / "corpora"
MD_DOCS = CORPORA / "md-docs"
QA = CORPORA / "qa" / "md-docs.jsonl"
COLLECTION = "ingestd"
DIM = 384


def fake_vector(text: str) -> list[float]:
    """A deterministic unit vector from the text's hash."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return (v / np.linalg.norm(v)).tolist()  # type: ignore[no-any-return]


def build(state: Path) -> None:
    """Index md-docs into ``state/qdrant`` as the engine would, with fake dense vectors."""
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine
    from ingestd.daemon.sources.filter import SourceFilter
    from ingestd.daemon.sources.walk import scan
    from ingestd.daemon.sync.preparing.documents import sparse_vector
    from ingestd.store.vectors.base import Point
    from ingestd.store.vectors.client.qdrant import QdrantStore

    cfg = load_config(None, roots=[MD_DOCS])
    eng = Engine(cfg, state / "engine", embed_model=lambda t: None)
    source = next(iter(eng.context.sources))
    store = QdrantStore(path=str(state / "qdrant"), engine="local")
    store.ensure_collection(COLLECTION, DIM)
    t0 = time.perf_counter()
    n = 0
    points: list[Any] = []
    for rel in sorted(scan(SourceFilter(cfg.sources[0], state / "engine"))):
        prep = eng.preparer.prepare(source, rel)
        for c, pid, payload in zip(prep.chunks, prep.ids, prep.payloads, strict=True):
            points.append(Point(pid, fake_vector(c.embed_text), payload, sparse_vector(c)))
        if len(points) >= 1024:
            store.upsert(COLLECTION, points)
            n += len(points)
            points = []
    store.upsert(COLLECTION, points)
    n += len(points)
    store.close()
    eng.close()
    (state / "built.json").write_text(json.dumps({"points": n}))
    print(f"indexed {n} points of md-docs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", type=Path, default=Path("/tmp/bench-search"))
    ap.add_argument("--repeat", type=int, default=1, help="passes over the questions")
    ap.add_argument("--questions", type=int, default=40, help="first N md-docs questions")
    ap.add_argument("-k", type=int, default=5)
    args = ap.parse_args()
    from ingestd.store.search.query import Filters
    from ingestd.store.search.sparse import query_vector
    from ingestd.store.vectors.client.qdrant import QdrantStore

    if not (args.state / "built.json").exists():
        build(args.state)
    questions = [json.loads(line) for line in QA.read_text().splitlines() if line.strip()]
    questions = questions[: args.questions]
    t0 = time.perf_counter()
    store = QdrantStore(path=str(args.state / "qdrant"), engine="local")
    opened = time.perf_counter() - t0
    n_points = store.count(COLLECTION)
    queries = [(fake_vector(q["question"]), query_vector(q["question"])) for q in questions]
    filters = {
        "none": Filters(),
        "folder": Filters(path="docs/collector"),
        "file": Filters(path="docs/collector/configuration.md"),
    }
    modes = ("dense", "sparse", "hybrid", "hybrid-rrf")  # hybrid-rrf: search.fusion rrf
    cases = [(m, f, False) for f in filters for m in modes] + [(m, "none", True) for m in modes]
    times: dict[tuple[str, str, bool], list[float]] = {c: [] for c in cases}
    for _ in range(args.repeat):  # interleaved, so machine noise hits every case alike
        for dense, sparse in queries:
            for mode, flt, ranks in cases:
                t = time.perf_counter()
                store.search(
                    COLLECTION, dense=dense, sparse=sparse, limit=args.k, filters=filters[flt],
                    mode=mode.split("-")[0], ranks=ranks,  # type: ignore[arg-type]
                    fusion="rrf" if mode.endswith("-rrf") else "union",
                )  # fmt: skip
                times[(mode, flt, ranks)].append(time.perf_counter() - t)
    store.close()
    base = statistics.median(times[("dense", "none", False)])
    print(f"code: {provenance()}")
    print(
        f"embedded Qdrant (qdrant-client local mode), {n_points} points of md-docs, opened in "
        f"{opened:.1f} s; {len(questions)} questions x {args.repeat}, k = {args.k}; "
        "times in ms, query embedding excluded"
    )
    print(f"{'mode':<11}{'filter':<8}{'ranks':<7}{'median':>9}{'p95':>9}{'x dense':>9}")
    for mode, flt, ranks in cases:
        ts = sorted(times[(mode, flt, ranks)])
        med = statistics.median(ts)
        p95 = ts[min(len(ts) - 1, int(0.95 * len(ts)))]
        print(
            f"{mode:<11}{flt:<8}{'yes' if ranks else 'no':<7}"
            f"{med * 1000:>9.1f}{p95 * 1000:>9.1f}{med / base:>9.2f}"
        )


if __name__ == "__main__":
    main()
