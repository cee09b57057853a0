"""Cold ingest of ../shared/corpora/md-docs: pipeline throughput vs raw ``model.encode``.

Prints, measured in the same process (machines are shared and noisy, so only ratios
mean something):

* chunks/s of the whole pipeline (scan, read, chunk, embed, upsert, manifest) on a cold
  state dir, with the model already loaded;
* chunks/s of bare ``model.encode`` on the very same chunk texts, same batch size;
* their ratio (the pipeline's overhead; target >= 0.9);
* the wall time of a no-op ``ingestd resync`` process beside a bare walk + stat of the
  tree in this process (target: about a second, no model loaded).

Usage: ``python bench/ingest.py [--corpus DIR] [--limit N]`` (N: first N files only).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpora" / "md-docs"


def walk_stat(root: Path) -> int:
    n = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            os.lstat(os.path.join(dirpath, f))
            n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--limit", type=int, default=0, help="only the first N files (0: all)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine
    from ingestd.store.embedder import SentenceTransformerEmbedder, model_info

    tmp = Path(tempfile.mkdtemp(prefix="ingestd-bench-"))
    corpus = args.corpus.resolve()
    if args.limit:
        sub = tmp / "corpus"
        files = sorted(p for p in corpus.rglob("*") if p.is_file())[: args.limit]
        for p in files:
            (sub / p.relative_to(corpus)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, sub / p.relative_to(corpus))
        corpus = sub
    model = SentenceTransformerEmbedder(model_info("all-MiniLM-L6-v2"), batch_size=16)
    model(["warm up"])

    cfg = load_config(None, roots=[corpus])
    state = tmp / "state"
    eng = Engine(cfg, state, embed_model=model)
    name = next(iter(eng.sources))
    t0 = time.perf_counter()
    res = eng.sync(name)
    pipeline_s = time.perf_counter() - t0
    texts: list[str] = []
    for rel in sorted(eng.manifest.documents(name)):
        prep = eng.prepare(name, rel)
        texts.extend(c.embed_text for c in prep.chunks)
    eng.close()
    # the pipeline embeds each distinct text once: compare on the distinct texts
    distinct = list(dict.fromkeys(texts))
    t0 = time.perf_counter()
    model(distinct)
    raw_s = time.perf_counter() - t0
    pipe_rate = res.embedded / pipeline_s
    raw_rate = len(distinct) / raw_s
    print(f"corpus: {corpus} ({res.indexed} documents, {res.failed} failed)")
    print(
        f"pipeline: {res.chunks_written} chunks written, {res.embedded} embedded "
        f"in {pipeline_s:.1f} s = {pipe_rate:.1f} chunks/s"
    )
    print(f"raw model.encode: {len(distinct)} texts in {raw_s:.1f} s = {raw_rate:.1f} chunks/s")
    print(f"ratio pipeline/raw: {pipe_rate / raw_rate:.3f} (target >= 0.9)")

    cmd = [sys.executable, "-m", "ingestd.daemon", "resync", "--state-dir", str(state), str(corpus)]
    best = min(_timed(cmd) for _ in range(3))
    t0 = time.perf_counter()
    n = walk_stat(corpus)
    walk_s = time.perf_counter() - t0
    print(
        f"no-op resync process: {best:.2f} s (best of 3); walk+stat of {n} files: "
        f"{walk_s * 1000:.1f} ms; ratio {best / walk_s:.0f}x"
    )
    shutil.rmtree(tmp, ignore_errors=True)


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
