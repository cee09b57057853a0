"""The bundled model's ONNX graph: built from its weights vs exported through torch.

``build``: the time and the peak memory of making the float32 graph, each in a process
of its own as ingestd makes it (``python -m ingestd.store.embedding.graphs.onnx_export``, into
an empty cache): the graph builder (onnx + numpy, checked against the float64
reference) beside the export through torch (the recipe every ONNX backend had before,
``TORCH_EXPORT``), in interleaved rounds; peak memory is the child's ``ru_maxrss``.

``vectors``: ``--per-corpus`` chunks (default 500) drawn from each of the four corpora
(md-docs, rst-docs, the Rust book, mkdocs-docs), chunked by ingestd's default rules,
embedded by sentence-transformers (torch, the reference) and by the built graph under
onnxruntime (float32), OpenVINO with its precision hint at f32, and OpenVINO in bf16
where the CPU has it natively; and by the graph torch exported, under onnxruntime. Per
corpus and runtime: mean and min cosine to torch, chunks under the bound (0.9999 for
float32, 0.999 for bf16), and the largest difference between the built graph's and the
exported graph's vectors under onnxruntime.

Usage::

    python bench/graph.py [--only build,vectors] [--rounds 3] [--per-corpus 500]

Needs the test extra (torch, sentence-transformers). Graphs go to ``--cache``
(default ``/tmp/bench-graph``).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CORPORA = HERE.parent.parent / "shared" / "corpora"
SETS = (
    ("md-docs", CORPORA / "md-docs"),
    ("rst-docs", CORPORA / "rst-docs"),
    ("rust-book", CORPORA / "history" / "base"),
    ("mkdocs-docs", CORPORA / "mkdocs-docs"),
)
MODEL = "all-MiniLM-L6-v2"


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


# -- build -----------------------------------------------------------------------------------


def make_once(how: str) -> tuple[float, float]:
    """Seconds and peak MB of one child making the float32 graph into an empty cache."""
    cache = Path(tempfile.mkdtemp(prefix="bench-graph-"))
    cmd = [
        sys.executable,
        "-m",
        "ingestd.store.embedding.graphs.onnx_export",
        MODEL,
        "onnx",
        str(cache),
    ]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}  # as ingestd starts it
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [*cmd, *(["torch"] if how == "torch" else [])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        err = proc.stderr.read().decode() if proc.stderr else ""
        if status != 0:
            raise RuntimeError(f"{how}: {err.strip().splitlines()[-1:]}")
        return seconds, usage.ru_maxrss / 1024
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def build_main(args: argparse.Namespace) -> None:
    runs: dict[str, list[tuple[float, float]]] = {"builder": [], "torch": []}
    for r in range(args.rounds):
        order = ("builder", "torch") if r % 2 == 0 else ("torch", "builder")
        for how in order:
            runs[how].append(make_once(how))
            s, mb = runs[how][-1]
            print(f"  round {r + 1} {how}: {s:.1f} s, {mb:.0f} MB", file=sys.stderr, flush=True)
    print(f"\nthe float32 graph of {MODEL}, made in a process of its own (load {_load()}):")
    print(f"  {'':28s} {'seconds':>8s} {'peak MB':>8s}")
    label = {"builder": "built from its weights", "torch": "exported through torch"}
    for how, got in runs.items():
        secs = statistics.median(s for s, _ in got)
        peak = statistics.median(m for _, m in got)
        print(f"  {label[how]:28s} {secs:8.1f} {peak:8.0f}")
    ratio = statistics.median(
        t / b for (b, _), (t, _) in zip(runs["builder"], runs["torch"], strict=True)
    )
    print(f"  export through torch / build: {ratio:.2f}x the time (median of per-round ratios)")


# -- vectors ---------------------------------------------------------------------------------


def sample_chunks(per_corpus: int, seed: int) -> dict[str, list[str]]:
    """``per_corpus`` embedded texts of each corpus's default-rule chunks (seeded draw)."""
    import retrieval  # bench/retrieval.py: the default rules' chunks of a corpus

    out = {}
    for name, corpus in SETS:
        ns = argparse.Namespace(only={"default"}, variant=[], extra=[], anchors="", add=[])
        (index,) = retrieval.build_indexes(corpus.resolve(), ns, set(), None)
        texts = index.texts
        picks = sorted(random.Random(seed).sample(range(len(texts)), min(per_corpus, len(texts))))
        out[name] = [texts[i] for i in picks]
    return out


def embedders(cache: Path) -> dict[str, Any]:
    """Each runtime of the comparison: label -> ``texts -> (n, 384)`` unit vectors."""
    from ingestd.store.embedding.embedder import SentenceTransformerEmbedder, model_info
    from ingestd.store.embedding.graphs.onnx_export import ensure_exported
    from ingestd.store.embedding.graphs.recipes import RECIPES, TORCH_EXPORT
    from ingestd.store.embedding.runtimes import openvino
    from ingestd.store.embedding.runtimes.cpu import native_bf16
    from ingestd.store.embedding.runtimes.onnx_runtime import OnnxRunner

    info = model_info(MODEL, "onnx")
    built, _ = ensure_exported(info, cache, RECIPES["onnx"])
    exported, _ = ensure_exported(info, cache, TORCH_EXPORT)
    out: dict[str, Any] = {"torch": SentenceTransformerEmbedder(model_info(MODEL), batch_size=16)}
    out["built, onnxruntime f32"] = OnnxRunner(info, built, quiet=True)
    precisions = ["f32", "bf16"] if native_bf16() else ["f32"]
    for precision in precisions:
        bf16 = precision == "bf16"

        def run(texts: list[str], bf16: bool = bf16) -> Any:
            original = openvino.native_bf16
            openvino.native_bf16 = lambda: bf16  # the precision hint OpenVINO is given
            try:
                emb = openvino.OpenVinoEmbedder.from_file(model_info(MODEL, "openvino"), built)
                got = emb(texts)
                assert emb.precision == ("bf16" if bf16 else "f32"), emb.precision
                return got
            finally:
                openvino.native_bf16 = original

        out[f"built, OpenVINO {precision}"] = run
    out["exported by torch, onnxruntime f32"] = OnnxRunner(info, exported, quiet=True)
    return out


def vectors_main(args: argparse.Namespace) -> None:
    chunks = sample_chunks(args.per_corpus, args.seed)
    models = embedders(args.cache / "models")
    vecs: dict[str, dict[str, Any]] = {}
    for label, model in models.items():
        t0 = time.perf_counter()
        vecs[label] = {name: np.asarray(model(texts)) for name, texts in chunks.items()}
        n = sum(len(t) for t in chunks.values())
        print(f"  {label}: {n} chunks in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(f"\ncosine to sentence-transformers (torch), {args.per_corpus} chunks per corpus "
          f"(load {_load()}):")  # fmt: skip
    print(f"  {'runtime':36s} {'corpus':12s} {'mean':>9s} {'min':>9s} {'under bound':>12s}")
    for label in models:
        if label == "torch":
            continue
        bound = 0.999 if "bf16" in label else 0.9999
        pooled = []
        for name, _ in SETS:
            cos = np.sum(vecs[label][name] * vecs["torch"][name], axis=1)
            pooled.append(cos)
            under = int((cos < bound).sum())
            print(
                f"  {label:36s} {name:12s} {cos.mean():9.6f} {cos.min():9.6f} {under:7d} < {bound}"
            )
        cos = np.concatenate(pooled)
        print(f"  {label:36s} {'all':12s} {cos.mean():9.6f} {cos.min():9.6f}")
    built, exported = vecs["built, onnxruntime f32"], vecs["exported by torch, onnxruntime f32"]
    diff = max(float(np.abs(built[n] - exported[n]).max()) for n, _ in SETS)
    print(f"\nbuilt vs exported graph under onnxruntime: largest difference {diff:.2e}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", default="build,vectors")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--per-corpus", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", type=Path, default=Path("/tmp/bench-graph"))
    args = p.parse_args()
    only = set(args.only.split(","))
    if "build" in only:
        build_main(args)
    if "vectors" in only:
        vectors_main(args)


if __name__ == "__main__":
    main()
