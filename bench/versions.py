"""Versions of a git source: embeddings, points and time for N versions vs one, and per commit.

A repository is made from the rust-book history (``../shared/corpora/history``: the
book's ``src/*.md`` at its base commit and after each of its 223 steps), with a tag
every ``--every`` steps (``v1`` ... ``vN``). Measured in one process:

* **one version**: the last tag alone, into a fresh state dir (embeddings, points,
  seconds: the baseline);
* **N versions**, added one at a time to one state dir: per new version the chunks
  embedded against the chunk texts no version indexed before had (target: ratio
  1.00, a text is never embedded twice), and the seconds against the baseline's;
* **points**: the store's points for the N versions against the distinct chunks over
  those versions (by chunk text, and by path and chunk text: what each version's view
  of the points holds), and against N times one version's (target: <= 1.05x the
  distinct (path, text) chunks; versions share a point per chunk at the same path);
  the report ends with the points ratio and the embeddings ratio and their verdicts;
* **per new commit**: ``main`` advanced by one history step at a time: blobs read,
  chunks embedded against the new chunk texts, seconds.

The embedder is a deterministic fake by default (counts and ratios do not depend on
the model; ``--real`` uses the bundled all-MiniLM-L6-v2, whose time dominates).

Usage::

    python bench/versions.py [--versions 5] [--every 40] [--commits 5] [--real]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ingestd.daemon.sources.versions import payload_versions, version_view  # noqa: E402
from tests.gitrepos import HistoryRepo, git  # noqa: E402  (the repository's test helpers)
from tests.helpers import fake_vectors, store_snapshot  # noqa: E402


def _engine(state: Path, url: str, refs: list[str], embed: Any) -> Any:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    source = {"kind": "git", "name": "book", "url": url, "refs": refs}
    cfg = load_config(
        None,
        overrides={
            "state_dir": str(state),
            "sources": [source],
            "mass_delete": {"min_count": 1_000_000},
        },
    )
    return Engine(cfg, state, embed_model=embed)


def _sync(state: Path, url: str, refs: list[str], embed: Any) -> tuple[Any, float, int]:
    """Fetch and sync; ``(result, seconds of the sync, blobs read from git)``.

    A fresh engine each time: nothing of the previous sync is in memory.
    """
    eng = _engine(state, url, refs, embed)
    try:
        src = eng.context.source("book")
        src.refresh()
        t0 = time.perf_counter()
        res = eng.sync("book")
        took = time.perf_counter() - t0
        read = src.blobs_read  # the verify below reads every document again
        assert eng.verify("book").clean, "verify is not clean"
        return res, took, read
    finally:
        eng.close()


def _hashes(points: dict[str, dict[str, Any]]) -> set[str]:
    return {str(p["chunk_hash"]) for p in points.values()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--versions", type=int, default=5, help="tags (versions) to index")
    ap.add_argument("--every", type=int, default=40, help="history steps between two tags")
    ap.add_argument("--commits", type=int, default=5, help="commits to advance main by")
    ap.add_argument("--real", action="store_true", help="the real model (else a fake)")
    args = ap.parse_args()
    embed: Any = fake_vectors
    if args.real:
        from ingestd.store.embedding.embedder import SentenceTransformerEmbedder, model_info

        embed = SentenceTransformerEmbedder(model_info("all-MiniLM-L6-v2"), batch_size=16)
    tmp = Path(tempfile.mkdtemp(prefix="bench-versions-"))
    repo = HistoryRepo(tmp / "repo", prefixes=("src/",))
    tags = []
    for i in range(args.versions):
        if i:
            for _ in range(args.every):
                repo.advance()
            repo.commit(f"up to step {repo.step}")
        tags.append(f"v{i + 1}")
        repo.tag(tags[-1])
    repo.push()
    url = str(repo.origin)
    print(
        f"rust-book history, src/*.md: {len(tags)} tags {args.every} steps apart "
        f"(last at step {repo.step}), embedder: {'all-MiniLM-L6-v2' if args.real else 'fake'}"
    )

    # the baseline: one version alone
    res, one_s, _ = _sync(tmp / "one", url, [tags[-1]], embed)
    one_points = len(store_snapshot(tmp / "one"))
    print(f"one version ({tags[-1]}): {res.embedded} embedded, {one_points} points, {one_s:.2f} s")

    # N versions, one at a time
    state = tmp / "many"
    seen: set[str] = set()
    worst = 0.0
    print("\nversion  new-texts  embedded  ratio  blobs-read  seconds  vs-one")
    for i in range(len(tags)):
        res, took, reads = _sync(state, url, tags[: i + 1], embed)
        hashes = _hashes(store_snapshot(state))
        new = hashes - seen
        seen |= hashes
        ratio = res.embedded / len(new) if new else float(res.embedded == 0)
        worst = max(worst, ratio)
        print(
            f"{tags[i]:>7}  {len(new):>9}  {res.embedded:>8}  {ratio:5.2f}  {reads:>10}  "
            f"{took:7.2f}  {took / one_s:6.2f}x"
        )
    points = store_snapshot(state)
    by_text = len(_hashes(points))
    # what each version holds, from each version's view of the points it is in
    views = [version_view(p, v) for p in points.values() for v in payload_versions(p)]
    by_path = len({(p["path"], p["chunk_hash"]) for p in views})
    per_version = Counter(str(p["version"]) for p in views)
    ratio = len(points) / by_path
    print(
        f"\npoints for {len(tags)} versions: {len(points)}; distinct chunk texts {by_text} "
        f"({len(points) / by_text:.2f}x), distinct (path, text) {by_path} "
        f"({ratio:.2f}x); {len(tags)} x one version = "
        f"{len(tags) * one_points} ({len(points) / (len(tags) * one_points):.2f}x); "
        f"chunks per version: {dict(sorted(per_version.items()))} (sum {len(views)})"
    )
    print(
        f"points ratio (points / distinct (path, text) chunks over the versions): "
        f"{ratio:.3f} -> {'MET' if ratio <= 1.05 else 'NOT MET'} (target <= 1.05); "
        f"embeddings ratio (embedded / new chunk texts, every version): "
        f"{worst:.2f} -> {'MET' if worst <= 1.0 else 'NOT MET'} (target 1.00)"
    )

    # per new commit on a branch
    refs = [*tags, "main"]
    _sync(state, url, refs, embed)
    seen = _hashes(store_snapshot(state))
    print("\ncommit  files-changed  blobs-read  new-texts  embedded  seconds")
    for _ in range(args.commits):
        before = git(repo.work, "rev-parse", "HEAD").strip()
        step = repo.advance()
        repo.commit(f"step {step}")
        repo.push("main")
        changed = len(git(repo.work, "diff", "--name-only", before, "HEAD").split())
        res, took, reads = _sync(state, url, refs, embed)
        hashes = _hashes(store_snapshot(state))
        new = hashes - seen
        seen |= hashes
        print(
            f"{step:>6}  {changed:>13}  {reads:>10}  {len(new):>9}  {res.embedded:>8}  {took:7.2f}"
        )
    print(f"\n(state and repository left in {tmp})")


if __name__ == "__main__":
    main()
