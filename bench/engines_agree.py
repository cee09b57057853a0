"""Retrieval through both embedded engines: the same rankings, up to ties, on the dev sets.

Each dev set (md-docs, rst-docs, rust-book, mkdocs-docs) is indexed with the default
rules into a Qdrant Edge store and into a local-mode store (the second from a copy of the
first's embedding cache: nothing is embedded twice), and every question of
``../shared/corpora/qa/<set>.jsonl`` is asked through ``ingestd search``'s own code
(:func:`ingestd.daemon.commands.query.search.search`, ``k`` = 10) in hybrid, dense and
sparse mode. Printed per set and mode: questions whose top 10 are identical, identical
up to ties (the same scores rank by rank; equal scores may come in either order), and
path recall@5 (the gold file among the first five hits) with each engine.

Usage::

    python bench/engines_agree.py                       # the four sets (embeds what is new)
    python bench/engines_agree.py --sets md-docs --cache /tmp/bench-retrieval/embeddings.db
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORPORA = HERE.parent.parent / "shared" / "corpora"
SETS = {
    "md-docs": CORPORA / "md-docs",
    "rst-docs": CORPORA / "rst-docs",
    "rust-book": CORPORA / "history" / "base",
    "mkdocs-docs": CORPORA / "mkdocs-docs",
}
MODES = ("hybrid", "dense", "sparse")


def _engine(root: Path, state: Path, engine: str, model: Any) -> Any:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    cfg = load_config(None, roots=[root], overrides={"qdrant": {"engine": engine}})
    return Engine(cfg, state, model_factory=lambda _info: model)


def run_set(name: str, work: Path, cache: Path | None, model: Any) -> dict[str, Any]:
    """Index ``name`` into both engines and compare every question's rankings."""
    from ingestd.daemon.commands.query.search import search

    root = SETS[name]
    questions = [
        json.loads(x) for x in (CORPORA / "qa" / f"{name}.jsonl").read_text().split("\n") if x
    ]
    results: dict[str, dict[str, list[list[dict[str, Any]]]]] = {}
    for engine in ("edge", "local"):
        state = work / f"{name}-{engine}"
        state.mkdir(mode=0o700)
        if cache is not None and cache.exists():
            with sqlite3.connect(cache) as src, sqlite3.connect(state / "embeddings.db") as dst:
                src.backup(dst)
        eng = _engine(root, state, engine, model)
        try:
            for source in eng.context.sources:
                eng.sync(source)
            results[engine] = {
                mode: [search(eng, q["question"], k=10, mode=mode) for q in questions]
                for mode in MODES
            }
        finally:
            eng.close()
        cache = state / "embeddings.db"
    out: dict[str, Any] = {"set": name, "questions": len(questions), "cache": cache}
    for mode in MODES:
        same = ties = 0
        recall = {"edge": 0, "local": 0}
        for i, q in enumerate(questions):
            a, b = results["edge"][mode][i], results["local"][mode][i]
            same += [h["id"] for h in a] == [h["id"] for h in b]
            ties += tie_groups(a) == tie_groups(b)
            for engine, hits in (("edge", a), ("local", b)):
                recall[engine] += any(h["path"] == q["path"] for h in hits[:5])
        out[mode] = (same, ties, recall["edge"], recall["local"])
    return out


def tie_groups(hits: list[dict[str, Any]], rel: float = 1e-4) -> list[frozenset[str]]:
    """The ids of ``hits`` (best first) in groups of equal score, each group unordered.

    Scores within ``rel`` (relative) of the group's first score are equal: the engines
    compute the same float32 scores in different orders of summation, so the last
    digits may differ.
    """
    groups: list[tuple[float, set[str]]] = []
    for h in hits:
        score = float(h["score"])
        if groups and abs(score - groups[-1][0]) <= rel * max(abs(groups[-1][0]), 1e-9):
            groups[-1][1].add(h["id"])
        else:
            groups.append((score, {h["id"]}))
    return [frozenset(ids) for _, ids in groups]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--cache", type=Path, help="an embedding cache to start from")
    args = ap.parse_args()
    from ingestd.store.embedding.embedder import SentenceTransformerEmbedder, model_info

    model = SentenceTransformerEmbedder(model_info("all-MiniLM-L6-v2"), batch_size=16)
    work = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    rows = []
    cache = args.cache
    try:
        for name in args.sets.split(","):
            row = run_set(name, work, cache, model)
            cache = row.pop("cache")
            rows.append(row)
            print(f"done: {name} (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("top 10 of `ingestd search` with Qdrant Edge and with local mode; path R@5 in %")
    print("| set | mode | questions | identical | identical up to ties | path R@5 edge / local |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        n = r["questions"]
        for mode in MODES:
            same, ties, re, rl = r[mode]
            print(
                f"| {r['set']} | {mode} | {n} | {same} | {ties} | "
                f"{100 * re / n:.1f} / {100 * rl / n:.1f} |"
            )


if __name__ == "__main__":
    main()
