"""The embedded engines side by side at 10k, 100k and 1M points: Qdrant Edge vs local mode.

Every (engine, size) runs in a child process of its own, so its peak RSS is its own:
the child builds a store through ingestd's own ``VectorStore`` classes
(:class:`~ingestd.store.vectors.edge.edge.EdgeStore`,
:class:`~ingestd.store.vectors.client.qdrant.QdrantStore` on qdrant-client's local mode), fills
it with synthetic points as ingestd writes them, and times what the daemon does:

* upsert, in calls of 256 points (points/s);
* search, p50/p95 in ms, per mode (hybrid, dense, sparse) without a filter and with a
  folder filter (``--path``: ~2% of the points), ``k`` = 10, queries drawn near the
  data's clusters as questions are near their answers;
* exactness: recall@10 of dense search against NumPy's exact cosine top-10;
* delete by ids (calls of 50 ids, ms), reopening the store (s), peak RSS of the child
  (MB: anonymous memory plus the pages of mapped files it touched), its anonymous and
  file-backed RSS after the searches, and disk (MB).

The data: clustered 384-d unit vectors (2,000 Gaussian centres, points spread around
them), BM25 sparse vectors of 40 terms from a Zipf-like vocabulary of 100,000 terms
(values as :func:`ingestd.store.search.sparse.document_vector` gives them), and payloads of
the daemon's keys with 600 characters of text. Everything is seeded: two runs store the
same points. Local mode holds every point in memory and scans all of them per query:
it runs up to ``--local-max`` points (it cannot hold a million here).

Targets (the store issue): Edge hybrid search at least 20x faster than local mode at
10k points; at 1M points Edge hybrid p95 under 300 ms, recall@10 >= 0.99 of exact, RSS
under 2.5 GB. The machine's load is printed: figures on shared cores are noisy, the
ratios less so.

Usage::

    python bench/store.py                              # 10k, 100k, 1M; local up to 100k
    python bench/store.py --sizes 10000 --queries 100  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
CENTRES = 2000
VOCAB = 100_000
TERMS = 40
BATCH = 256
COLLECTION = "ingestd"


def _unit(v: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def centres() -> np.ndarray[Any, Any]:
    """The clusters' centres (seeded)."""
    return _unit(np.random.default_rng(0).standard_normal((CENTRES, DIM))).astype(np.float32)


def batch_vectors(start: int, n: int, c: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Dense vectors ``start..start+n`` (seeded by ``start``): a centre plus noise."""
    rng = np.random.default_rng(1_000_003 + start)
    which = rng.integers(0, CENTRES, n)
    return _unit(c[which] + 0.35 * rng.standard_normal((n, DIM))).astype(np.float32)


def points(start: int, n: int, c: np.ndarray[Any, Any]) -> list[Any]:
    """Points ``start..start+n`` as ingestd writes them."""
    from ingestd.store.search.query import path_prefixes
    from ingestd.store.search.sparse import SparseVec
    from ingestd.store.vectors.base import Point

    rng = np.random.default_rng(2_000_003 + start)
    vecs = batch_vectors(start, n, c)
    out = []
    words = ("collector", "exporter", "span", "metric", "sampler", "pipeline", "config")
    for i in range(n):
        k = start + i
        terms = np.unique((rng.zipf(1.3, TERMS) + rng.integers(0, 50)) % VOCAB)
        values = rng.uniform(0.6, 2.2, len(terms))
        folder = f"docs/area{k % 50}/part{k % 7}"
        path = f"{folder}/page{k % 997}.md"
        text = " ".join(words[j % 7] for j in rng.integers(0, 7, 90))[:600]
        payload = {
            "source": "bench",
            "path": path,
            "path_prefixes": path_prefixes(path),
            "doc_hash": f"{k:064x}",
            "chunk_hash": f"{k:064x}",
            "ordinal": k % 20,
            "start_char": 0,
            "end_char": 600,
            "start_line": 1,
            "end_line": 12,
            "n_tokens": 150,
            "chunker": "markdown",
            "rule": "default",
            "rule_fingerprint": "bench",
            "heading_path": ["Bench", f"Part {k % 7}"],
            "text": text,
            "indexed_at": 0.0,
        }
        pid = str(uuid.UUID(int=k + 1))
        sparse = SparseVec([int(t) for t in terms], [float(x) for x in values])
        out.append(Point(pid, vecs[i], payload, sparse))
    return out


def _status_mb(key: str = "VmRSS") -> float:
    """A memory figure of this process from ``/proc/self/status``, in MB (0 if absent)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _open(engine: str, folder: Path) -> Any:
    if engine == "edge":
        from ingestd.store.vectors.edge.edge import EdgeStore

        return EdgeStore(folder, engine="edge")
    from ingestd.store.vectors.client.qdrant import QdrantStore

    return QdrantStore(path=str(folder), engine="local")


def _pcts(ts: list[float]) -> tuple[float, float]:
    ts = sorted(ts)
    return ts[len(ts) // 2] * 1000, ts[min(len(ts) - 1, int(0.95 * len(ts)))] * 1000


def child(engine: str, n: int, folder: Path, queries: int) -> dict[str, Any]:
    """Build and time one store; returns the figures."""
    from ingestd.store.search.query import Filters
    from ingestd.store.search.sparse import SparseVec

    c = centres()
    rng = np.random.default_rng(7)
    qv = _unit(c[rng.integers(0, CENTRES, queries)] + 0.5 * rng.standard_normal((queries, DIM)))
    qs = []
    for _ in range(queries):  # a few frequent terms, weight 1 each, as query_vector gives
        terms = sorted({int(t) for t in rng.zipf(1.3, 4) % VOCAB})
        qs.append(SparseVec(terms, [1.0] * len(terms)))
    # the exact top-10 of each query, kept up to date batch by batch (holding every
    # vector here would add 1.5 GB to this process's RSS at 1M points)
    top_s = np.full((queries, 10), -np.inf, dtype=np.float32)
    top_i = np.zeros((queries, 10), dtype=np.int64)
    store = _open(engine, folder)
    store.ensure_collection(COLLECTION, DIM)
    t_up = 0.0
    for start in range(0, n, 10_000):
        pts = points(start, min(10_000, n - start), c)
        scores = np.concatenate([top_s, qv @ np.asarray([p.vector for p in pts]).T], axis=1)
        ids = np.concatenate([top_i, np.tile(np.arange(start, start + len(pts)), (queries, 1))], 1)
        best = np.argsort(-scores, axis=1, kind="stable")[:, :10]
        top_s, top_i = np.take_along_axis(scores, best, 1), np.take_along_axis(ids, best, 1)
        t = time.perf_counter()
        for i in range(0, len(pts), BATCH):
            store.upsert(COLLECTION, pts[i : i + BATCH])
        t_up += time.perf_counter() - t
    del pts
    out: dict[str, Any] = {"engine": engine, "points": n, "upsert_per_s": n / t_up}
    recall = []
    for mode in ("hybrid", "dense", "sparse"):
        # --path of one folder of 50: ~2% of the points
        for name, flt in (("none", None), ("path", Filters(path="docs/area3"))):
            ts = []
            for i in range(queries):
                t = time.perf_counter()
                hits = store.search(
                    COLLECTION, dense=qv[i], sparse=qs[i], limit=10, filters=flt, mode=mode
                )
                ts.append(time.perf_counter() - t)
                if mode == "dense" and name == "none":
                    want = {str(uuid.UUID(int=int(k) + 1)) for k in top_i[i]}
                    recall.append(len(want & {h.id for h in hits}) / 10)
            out[f"{mode}/{name}"] = _pcts(ts)
    out["recall@10"] = float(np.mean(recall)) if recall else None
    out["rss_anon_file_mb"] = (_status_mb("RssAnon"), _status_mb("RssFile"))  # after searching
    ids = [str(uuid.UUID(int=k + 1)) for k in rng.choice(n, min(n, 50 * 20), replace=False)]
    ts = []
    for i in range(0, len(ids), 50):
        t = time.perf_counter()
        store.delete(COLLECTION, ids[i : i + 50])
        ts.append(time.perf_counter() - t)
    out["delete50_ms"] = _pcts(ts)
    store.close()
    t = time.perf_counter()
    store = _open(engine, folder)
    store.point_count(COLLECTION)
    out["reopen_s"] = time.perf_counter() - t
    store.close()
    out["rss_mb"] = _status_mb()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    du = subprocess.run(["du", "-sm", str(folder)], capture_output=True, text=True, check=False)
    out["disk_mb"] = int(du.stdout.split()[0]) if du.stdout else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--engines", default="edge,local")
    ap.add_argument("--local-max", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=50, help="queries per mode and filter")
    ap.add_argument("--child", nargs=3, metavar=("ENGINE", "N", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        engine, n, folder = args.child
        print(json.dumps(child(engine, int(n), Path(folder), args.queries)))
        return
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for engine in args.engines.split(","):
            if engine == "local" and n > args.local_max:
                continue
            queries = args.queries if engine == "edge" or n <= 10_000 else 5
            work = Path(tempfile.mkdtemp(prefix=f"bench-store-{engine}-"))
            try:
                proc = subprocess.run(
                    [sys.executable, __file__, "--queries", str(queries), "--child", engine,
                     str(n), str(work / "store")],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
            finally:
                shutil.rmtree(work, ignore_errors=True)
            if proc.returncode != 0:
                print(f"{engine} {n}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"done: {engine} {n} (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    _table(rows)


def _table(rows: list[dict[str, Any]]) -> None:
    keys = ["hybrid/none", "hybrid/path", "dense/none", "dense/path", "sparse/none", "sparse/path"]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; ms as p50 / p95")
    head = ["engine", "points", "upsert/s"] + keys + ["recall@10", "delete 50", "reopen s"]
    print("| " + " | ".join(head + ["peak RSS MB", "anon / file MB", "disk MB"]) + " |")
    print("|" + " --- |" * (len(head) + 3))
    for r in rows:
        cells = [r["engine"], f"{r['points']:,}", f"{r['upsert_per_s']:,.0f}"]
        cells += [f"{r[k][0]:.1f} / {r[k][1]:.1f}" for k in keys]
        rec = r["recall@10"]
        cells += ["-" if rec is None else f"{rec:.3f}", f"{r['delete50_ms'][0]:.1f}"]
        anon, file = r["rss_anon_file_mb"]
        cells += [f"{r['reopen_s']:.2f}", f"{r['peak_rss_mb']:.0f}", f"{anon:.0f} / {file:.0f}"]
        cells += [str(r["disk_mb"])]
        print("| " + " | ".join(cells) + " |")
    by = {(r["engine"], r["points"]): r for r in rows}
    for n in sorted({r["points"] for r in rows}):
        e, loc = by.get(("edge", n)), by.get(("local", n))
        if e and loc:
            ratio = loc["hybrid/none"][0] / e["hybrid/none"][0]
            print(f"{n:,} points: Edge hybrid p50 is {ratio:.0f}x faster than local mode")


if __name__ == "__main__":
    main()
