"""Searches and edits through a running daemon on md-docs, per embedded engine.

What a user of ``ingestd search`` waits for: for each engine (``edge``, ``local``) a
real ``ingestd run`` (bundled all-MiniLM-L6-v2) serves a copy of md-docs, and this
process, with the same model loaded, times in the same run:

* ``embed``: embedding a question alone (the floor of a dense or hybrid search);
* ``search``: the same question through the daemon's control socket, the path of
  ``ingestd search``, in hybrid mode (embedding included), ``k`` = 5;
* edit to searchable: 20 one-paragraph edits of a page, each timed until a sparse
  search finds its new word, and the daemon's own
  ``ingestd_edit_to_searchable_seconds`` histogram read from its metrics endpoint.

The target (the store issue): hybrid search p50 no more than 3x the query embedding
alone. The first engine's resync embeds md-docs (minutes); the second starts from a
copy of its embedding cache, so it embeds nothing. Questions and searches interleave,
so machine noise hits both alike; the load average is printed.

Usage::

    python bench/search_daemon.py                    # both engines, 40 questions, 20 edits
    python bench/search_daemon.py --engines edge --questions 20 --edits 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORPORA = HERE.parent.parent / "shared" / "corpora"
MD_DOCS = CORPORA / "md-docs"
QA = CORPORA / "qa" / "md-docs.jsonl"
EDITED = "docs/collector/configuration.md"


def _ingestd() -> list[str]:
    exe = Path(sys.executable).parent / "ingestd"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ingestd.daemon"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def _request(state: Path, cmd: str, args: dict[str, Any] | None = None) -> Any:
    from ingestd.daemon.wire.errors import NoDaemon
    from ingestd.daemon.wire.protocol import request

    try:
        return request(state, cmd, args or {}, timeout=600)
    except NoDaemon:
        return None


def _lag_p50(port: int) -> float | None:
    """Median of ``ingestd_edit_to_searchable_seconds`` from its buckets (upper bound)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    buckets = []
    for line in text.splitlines():
        if line.startswith("ingestd_edit_to_searchable_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.split()[-1])))
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    return next(le for le, n in buckets if n >= total / 2)


def run_engine(
    engine: str, work: Path, cache: Path | None, model: Any, args: Any
) -> dict[str, Any]:
    """Serve md-docs with ``engine`` and time searches and edits."""
    tree = work / f"tree-{engine}"
    shutil.copytree(MD_DOCS, tree)
    state = work / f"state-{engine}"
    state.mkdir(mode=0o700)
    if cache is not None:  # SQLite's backup: a consistent copy of a database in use
        import sqlite3

        with sqlite3.connect(cache) as src, sqlite3.connect(state / "embeddings.db") as dst:
            src.backup(dst)
    port = _free_port()
    cfg = work / f"{engine}.yaml"
    cfg.write_text(
        json.dumps(
            {
                "sources": [{"name": "docs", "root": str(tree)}],
                "qdrant": {"engine": engine},
                "metrics": {"port": port},
                "embedding": {"preload": True},
            }
        )
    )
    env = {**os.environ, "INGESTD_QDRANT_ENGINE": engine}
    t0 = time.monotonic()
    subprocess.run(
        [*_ingestd(), "resync", "--config", str(cfg), "--state-dir", str(state)],
        check=True, env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    indexed_s = time.monotonic() - t0
    daemon = subprocess.Popen(
        [*_ingestd(), "run", "--config", str(cfg), "--state-dir", str(state)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        st = _wait(
            lambda: (s := _request(state, "status")) and s["daemon"]["phase"] == "watching" and s,
            900,
            "the daemon's first reconcile",
        )
        _wait(lambda: _request(state, "status")["daemon"]["model_loaded"], 300, "the model")
        points = sum(s["chunks"] for s in st["sources"])
        questions = [json.loads(x) for x in QA.read_text().splitlines() if x.strip()]
        embed, search = [], []
        for q in questions[: args.questions]:
            t = time.perf_counter()
            model([q["question"]])
            embed.append(time.perf_counter() - t)
            t = time.perf_counter()
            _request(state, "search", {"query": q["question"], "k": 5, "mode": "hybrid"})
            search.append(time.perf_counter() - t)
        edits = []
        page = tree / EDITED
        for i in range(args.edits):
            word = f"zqxedit{i}marker"
            page.write_text(page.read_text() + f"\n\nA paragraph about {word} and its use.\n")
            t = time.perf_counter()
            _wait(
                lambda w=word: _request(state, "search", {"query": w, "k": 1, "mode": "sparse"}),
                120,
                f"edit {i} to be searchable",
            )
            edits.append(time.perf_counter() - t)
        lag = _lag_p50(port)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=120)
    return {
        "engine": engine,
        "points": points,
        "indexed_s": indexed_s,
        "embed": embed,
        "search": search,
        "edits": edits,
        "lag_p50_bucket": lag,
        "cache": state / "embeddings.db",
    }


def _ms(ts: list[float], q: float = 0.5) -> float:
    ts = sorted(ts)
    return ts[min(len(ts) - 1, int(q * len(ts)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="edge,local")
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--cache", type=Path, help="an embeddings.db of md-docs to start from")
    args = ap.parse_args()
    from ingestd.store.embedding.embedder import SentenceTransformerEmbedder, model_info

    model = SentenceTransformerEmbedder(model_info("all-MiniLM-L6-v2"), batch_size=16)
    model(["warm up"])
    work = Path(tempfile.mkdtemp(prefix="bench-search-daemon-"))
    rows = []
    cache = args.cache
    try:
        for engine in args.engines.split(","):
            row = run_engine(engine, work, cache, model, args)
            cache = row.pop("cache")
            rows.append(row)
            print(f"done: {engine} (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"md-docs through `ingestd run`, {args.questions} questions, k = 5; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip
    print("| engine | points | embed p50 ms | hybrid search p50 / p95 ms | search / embed "
          "| edit to searchable p50 s (measured; histogram bucket) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ratio = statistics.median(r["search"]) / statistics.median(r["embed"])
        lag = r["lag_p50_bucket"]
        print(
            f"| {r['engine']} | {r['points']:,} | {_ms(r['embed']):.1f} | "
            f"{_ms(r['search']):.1f} / {_ms(r['search'], 0.95):.1f} | {ratio:.1f}x | "
            f"{_ms(r['edits']) / 1000:.2f}; <= {lag} |"
        )


if __name__ == "__main__":
    main()
