"""Ingest speed: the embedding backends side by side, and the pipeline vs raw encode.

Prints, measured in the same process (machines are shared and noisy, so only ratios
mean something):

``backends`` (the default):

* the CPU and its vector instruction sets (avx2, avx512*, vnni, amx from /proc/cpuinfo);
* chunks/s of each backend (``torch``, ``onnx``, ``onnx-int8``, and with ``--variants``
  the other ONNX recipes tried) on the same sample of real chunks of the four corpora,
  same batch size, in interleaved rounds; the ratio to torch is the median of the
  per-round ratios;
* mean and min cosine of each backend's vectors to torch's, over every chunk of the
  four corpora;
* span and path recall@5 on the four dev sets (``qa/md-docs``, ``qa/rst-docs``,
  ``qa/rust-book``, ``qa/mkdocs-docs``) per backend: default rules, dense cosine, brute
  force (the scoring of ``bench/retrieval.py``, imported), and whether each backend
  keeps span R@5 within 1 point of torch on every set;
* the idle RSS of a process that loaded each backend and embedded one text.

``cold``: the default backend against torch through the whole pipeline, in the same
run: a cold ingest (fresh state dir, model loaded and exported beforehand) of the first
``--limit`` files of ``--corpus`` per backend, in interleaved rounds (chunks embedded per
second; each ratio is the median of the per-round ratios; the target is >= 1.8x): the
default install's (``onnx``) and, where the ``openvino`` extra is installed, its
default on a CPU without bfloat16 (``openvino f32``: bfloat16 off, as
``INGESTD_CPU_BF16=0`` makes it; what most laptops run) and on this CPU if it has
bfloat16 (``openvino bf16``), each against torch in the same run; ``--backends`` names
other labels instead. Then the loaded and idle RSS of a real ``ingestd run`` process
of each serving that store (targets <= 350 MB loaded, <= 250 MB idle).
Span R@5 of each on the four dev sets is the ``recall`` part.

``threads``: the default backend at each of ``--thread-counts`` threads (streams) on the
same sample: chunks/s, and chunks per CPU second (what the threads cost the machine).

``pipeline``: cold ingest of md-docs (scan, read, chunk, embed, upsert, manifest) vs
bare embedding of the same texts, and a no-op ``ingestd resync`` process vs walk+stat.

Usage::

    python bench/ingest.py [--variants] [--sample 256] [--rounds 5] [--batch-size 16]
    python bench/ingest.py --only speed,rss        # skip the recall part
    python bench/ingest.py --only pipeline [--limit N] [--backend onnx-int8]
    python bench/ingest.py --only cold [--limit 120] [--rounds 5] [--threads N]
    python bench/ingest.py --only cold --backends "onnx;openvino f32"
    python bench/ingest.py --only threads [--thread-counts 1,2] [--sets md-docs]
    python bench/ingest.py --only recall --backends onnx   # span R@5, four dev sets
    python bench/ingest.py --only recall --backends "openvino f32"  # bfloat16 off

Vectors of the recall part are cached by (model fingerprint, text hash) in
``--cache`` (default ``/tmp/bench-ingest``), so reruns only embed what is new; exported
ONNX models go to ``<cache>/models``.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ingestd.store.embedding.runtimes.cpu import BF16_ENV

HERE = Path(__file__).resolve().parent
CORPORA = HERE.parent.parent / "shared" / "corpora"
DEFAULT_CORPUS = CORPORA / "md-docs"
#: The four dev sets: (name, corpus folder, questions).
DEV_SETS = (
    ("md-docs", CORPORA / "md-docs", CORPORA / "qa" / "md-docs.jsonl"),
    ("rst-docs", CORPORA / "rst-docs", CORPORA / "qa" / "rst-docs.jsonl"),
    ("rust-book", CORPORA / "history" / "base", CORPORA / "qa" / "rust-book.jsonl"),
    ("mkdocs-docs", CORPORA / "mkdocs-docs", CORPORA / "qa" / "mkdocs-docs.jsonl"),
)
MODEL = "all-MiniLM-L6-v2"
CPU_FLAGS = (
    "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
    "avx512_bf16", "amx_int8", "amx_bf16",
)  # fmt: skip
RECALL_BOUND = 1.0  # points of span R@5 a backend may lose to torch on any set


@dataclass
class Variant:
    label: str
    backend: str
    recipe: Any = None  # OnnxRecipe; None: the backend's own
    recall: bool = True  # float32 recipes give torch's vectors: their recall is onnx's
    bf16: bool | None = None  # openvino: bfloat16 on or off; None: as the CPU has it


def variants(explore: bool) -> list[Variant]:
    """The shipped backends, and with ``explore`` the other recipes tried."""
    from dataclasses import replace

    from ingestd.store.embedding.backends import INT8_SETTINGS as Q
    from ingestd.store.embedding.backends import RECIPES

    out = [
        Variant("torch", "torch"),
        Variant("onnx", "onnx"),
        Variant("openvino", "openvino"),
        Variant("openvino f32", "openvino", bf16=False),
        Variant("onnx-int8", "onnx-int8"),
    ]
    if not explore:
        return out
    fp32 = RECIPES["onnx"]
    ffn_out = (r"/layer\.\d+/output/dense/MatMul$",)
    more = {
        "onnx unfused (ORT online optimisation only)": replace(fp32, fusion=None),
        "onnx exported through torch, bert fusion": fp32.through_torch,
        "onnx dynamo export, bert fusion": replace(
            fp32.through_torch, exporter="dynamo", attention="sdpa"
        ),
        "int8 without quant_pre_process": replace(Q, pre_process=False),
        "int8 per-tensor": replace(Q, per_channel=False),
        "int8 per-channel, QUInt8 weights": replace(Q, weight_type="QUInt8"),
        "int8 per-channel, reduce_range": replace(Q, reduce_range=True),
        "int8 MatMul only (attention, embeddings fp32)": replace(Q, op_types=("MatMul",)),
        "int8 FFN output MatMuls fp32": replace(Q, exclude=ffn_out),
    }
    for label, r in more.items():
        if label.startswith("onnx"):
            out.append(Variant(label, "onnx", r, recall=False))
        else:
            # dominated on speed or cosine by another variant: speed and cosine only
            full = not any(k in label for k in ("QUInt8", "reduce_range", "pre_process"))
            out.append(Variant(label, "onnx-int8", replace(fp32, quant=r), recall=full))
    return out


def cpu_line() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "cpu: /proc/cpuinfo not readable"
    model = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
    flags_m = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    flags = set(flags_m.group(1).split()) if flags_m else set()
    have = [f for f in CPU_FLAGS if f in flags]
    lacks = [f for f in CPU_FLAGS if f not in flags]
    return (
        f"cpu: {model.group(1) if model else '?'}, {os.cpu_count()} logical cores\n"
        f"  has: {' '.join(have) or '-'}\n  lacks: {' '.join(lacks) or '-'}"
    )


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


# -- the chunks of the four dev corpora -----------------------------------------------------


@dataclass
class DevSet:
    name: str
    questions: list[Any]
    index: Any  # retrieval.Index


def load_dev_sets(names: list[str]) -> list[DevSet]:
    import retrieval  # bench/retrieval.py: question loading, chunking and scoring

    out = []
    for name, corpus, qa in DEV_SETS:
        if name not in names:
            continue
        ns = argparse.Namespace(only={"default"}, variant=[], extra=[], anchors="", add=[])
        root = corpus.resolve()
        (index,) = retrieval.build_indexes(root, ns, set(), None)
        questions = retrieval.load_questions(qa, root, retrieval.text_of(root))
        out.append(DevSet(name, questions, index))
    return out


def bf16_env(v: Variant) -> dict[str, str]:
    """The environment that makes a process compute ``v`` as its ``bf16`` says."""
    return {BF16_ENV: "1" if v.bf16 else "0"} if v.bf16 is not None else {}


def make_embedder(
    v: Variant, cache_dir: Path, batch_size: int, threads: int | None = None
) -> tuple[Any, Any]:
    from ingestd.store.embedding.embedder import load_embedder, model_info

    info = model_info(MODEL, v.backend, v.recipe)
    model = load_embedder(info, batch_size=batch_size, threads=threads, cache_dir=cache_dir)
    if v.bf16 is not None:
        model.bf16 = v.bf16  # OpenVinoEmbedder: read when its session opens
    return info, model


# -- speed -----------------------------------------------------------------------------------


def speed(
    vs: list[Variant], sample: list[str], args: argparse.Namespace
) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float]]]:
    """Per variant: chunks/s (median) and ratio to torch (median of per-round ratios);
    and (mean, min) cosine to torch on the sample."""
    models = {}
    for v in list(vs):
        _, model = make_embedder(v, args.cache / "models", args.batch_size)
        try:
            model(sample[:4])  # load (and export if needed) outside the timing
        except Exception as exc:  # e.g. the dynamo exporter needs onnxscript
            print(f"  skipped {v.label}: {type(exc).__name__}: {exc}", file=sys.stderr)
            vs.remove(v)
            continue
        models[v.label] = model
    times: dict[str, list[float]] = {v.label: [] for v in vs}
    vecs: dict[str, Any] = {}
    for r in range(args.rounds):
        order = vs if r % 2 == 0 else vs[::-1]  # neither goes always first
        for v in order:
            t0 = time.perf_counter()
            vecs[v.label] = models[v.label](sample)
            times[v.label].append(time.perf_counter() - t0)
        line = " ".join(
            f"{v.label.split(' ')[0]}={len(sample) / times[v.label][-1]:.1f}" for v in vs
        )
        print(f"  round {r + 1}: {line}", file=sys.stderr, flush=True)
    base = times["torch"]
    rates = {
        label: (
            len(sample) / statistics.median(t),
            statistics.median(b / x for b, x in zip(base, t, strict=True)),
        )
        for label, t in times.items()
    }
    cos = {label: np.sum(v * vecs["torch"], axis=1) for label, v in vecs.items()}
    return rates, {label: (float(c.mean()), float(c.min())) for label, c in cos.items()}


# -- recall ----------------------------------------------------------------------------------


def embed_all(v: Variant, texts: list[str], args: argparse.Namespace, cache: Any) -> Any:
    import retrieval

    from ingestd.store.embedding.cache import CachedEmbedder
    from ingestd.store.vectors.ids import chunk_hash

    info, model = make_embedder(v, args.cache / "models", args.batch_size)
    # keyed by the backend too: torch, onnx and openvino share a fingerprint, and this
    # part compares their vectors
    emb = CachedEmbedder(model, f"{info.fingerprint}/{v.label}", cache, chunk_hash)
    return retrieval.embed(texts, emb, v.label)


def recall(
    vs: list[Variant], sets: list[DevSet], args: argparse.Namespace
) -> tuple[dict[str, dict[str, tuple[float, float]]], dict[str, tuple[float, float]]]:
    """Per variant: {set: (span R@5, path R@5)}, and (mean, min) cosine to torch."""
    import retrieval

    from ingestd.store.embedding.cache import EmbeddingCache

    cache = EmbeddingCache(args.cache / "embeddings.db", max_entries=10_000_000)
    scores: dict[str, dict[str, tuple[float, float]]] = {}
    cosines: dict[str, tuple[float, float]] = {}
    torch_vecs: dict[str, Any] = {}
    try:
        for v in vs:
            if not v.recall:
                continue
            scores[v.label] = {}
            cos = []
            for ds in sets:
                qvecs = embed_all(v, [q.question for q in ds.questions], args, cache)
                ds.index.vecs = embed_all(v, ds.index.texts, args, cache)
                queries = retrieval.Queries([q.question for q in ds.questions], qvecs)
                ranked = retrieval.rank_dense(ds.index, queries)
                res = retrieval.evaluate(ds.index, ds.questions, ranked)
                span = retrieval.metrics([r.span_rank for r in res])["R@5"]
                path = retrieval.metrics([r.path_rank for r in res])["R@5"]
                scores[v.label][ds.name] = (span, path)
                if v.label == "torch":
                    torch_vecs[ds.name] = ds.index.vecs
                cos.append(np.sum(ds.index.vecs * torch_vecs[ds.name], axis=1))
            allcos = np.concatenate(cos)
            cosines[v.label] = (float(allcos.mean()), float(allcos.min()))
            print(f"  recall done: {v.label}", file=sys.stderr, flush=True)
    finally:
        cache.close()
    return scores, cosines


# -- idle RSS --------------------------------------------------------------------------------


def rss_child(backend: str, cache_dir: Path) -> None:
    """Load ``backend``, embed one text, print VmRSS in kB (run in a fresh process)."""
    from ingestd.store.embedding.embedder import load_embedder, model_info

    model = load_embedder(model_info(MODEL, backend), cache_dir=cache_dir)
    model(["The collector receives telemetry."])
    status = Path("/proc/self/status").read_text()
    m = re.search(r"^VmRSS:\s*(\d+) kB", status, re.M)
    print(m.group(1) if m else "0")


def rss(vs: list[Variant], args: argparse.Namespace) -> dict[str, float]:
    out = {}
    for v in vs:
        if v.recipe is not None:
            continue
        cmd = [sys.executable, __file__, "--rss-child", v.backend, "--cache", str(args.cache)]
        env = {**os.environ, **bf16_env(v)}
        got = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
        got = got.stdout.split()
        out[v.label] = int(got[-1]) / 1024
    return out


# -- report ----------------------------------------------------------------------------------


def report(
    vs: list[Variant],
    sample_n: int,
    args: argparse.Namespace,
    sp: dict[str, tuple[float, float]],
    sample_co: dict[str, tuple[float, float]],
    sc: dict[str, dict[str, tuple[float, float]]],
    co: dict[str, tuple[float, float]],
    mem: dict[str, float],
) -> None:
    from ingestd.store.embedding.backends import INT8_SETTINGS

    sets = args.sets.split(",")
    print(
        f"\nchunks/s: {sample_n} chunks of the four corpora, batch size {args.batch_size} "
        f"(the ONNX backends run each text alone), median of {args.rounds} interleaved rounds; "
        "cosine to torch over every chunk of the four corpora (* on the timed sample); "
        "recall: span R@5 / path R@5 per dev set; RSS: idle, after one text"
    )
    head = f"{'backend':<46}{'chunks/s':>9}{'x torch':>8}{'cos mean':>9}{'cos min':>8}"
    head += "".join(f"{s:>15}" for s in sets) + f"{'RSS MB':>8}  recall bound"
    print(head)
    torch_sc = sc.get("torch", {})
    for v in vs:
        rate, ratio = sp.get(v.label, (float("nan"), float("nan")))
        cm, cn = co.get(v.label) or sample_co.get(v.label) or (float("nan"), float("nan"))
        mark = " " if v.label in co else "*"
        line = f"{v.label[:45]:<46}{rate:>9.1f}{ratio:>8.2f}{cm:>8.4f}{mark}{cn:>8.4f}"
        ok = True
        for s in sets:
            if v.label in sc:
                span, path = sc[v.label][s]
                line += f"{span:>8.1f} /{path:>5.1f}"
                ok = ok and span >= torch_sc[s][0] - RECALL_BOUND
            else:
                ok = False
                line += f"{'-':>15}"
        line += f"{mem[v.label]:>8.0f}" if v.label in mem else f"{'-':>8}"
        line += "  kept" if ok and v.label in sc else ("  LOST" if v.label in sc else "  -")
        print(line)
    eligible = [
        v.label
        for v in vs
        if v.label != "torch"
        and v.label in sc
        and all(sc[v.label][s][0] >= torch_sc[s][0] - RECALL_BOUND for s in sets)
    ]
    if eligible and sp:
        best = max(eligible, key=lambda label: sp[label][1])
        ratio = sp[best][1]
        verdict = "MET" if ratio >= 1.4 else "NOT MET"
        print(
            f"\ntarget: best backend within {RECALL_BOUND:.0f} point of torch's span R@5 on "
            f"every set runs >= 1.4x torch: {verdict} ({best}: {ratio:.2f}x)"
        )
    print(f"onnx-int8 settings: {INT8_SETTINGS}")


def backends_main(args: argparse.Namespace) -> None:
    print(cpu_line())
    vs = variants(args.variants)
    if args.backends:
        wanted = args.backends.split(";")
        vs = [v for v in vs if v.label in wanted or v.label == "torch"]
    print("backends: " + ", ".join(v.label for v in vs))
    only = set(args.only.split(","))
    sets = load_dev_sets(args.sets.split(",")) if only & {"speed", "recall"} else []
    pool = [t for ds in sets for t in ds.index.texts]
    random.Random(0).shuffle(pool)
    sample = pool[: args.sample]
    if "speed" in only:
        print(f"load average before the timing: {_load()}")
    sp, sample_co = speed(vs, sample, args) if "speed" in only else ({}, {})
    if "speed" in only:
        # other work on a shared machine slows every backend, but not equally
        print(f"load average after the timing: {_load()}")
    sc, co = recall(vs, sets, args) if "recall" in only else ({}, {})
    mem = rss(vs, args) if "rss" in only else {}
    report(vs, len(sample), args, sp, sample_co, sc, co, mem)


# -- pipeline vs raw encode (the pipeline's overhead) -----------------------------------------


def walk_stat(root: Path) -> int:
    n = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            os.lstat(os.path.join(dirpath, f))
            n += 1
    return n


def pipeline_main(args: argparse.Namespace) -> None:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    tmp = Path(tempfile.mkdtemp(prefix="ingestd-bench-"))
    corpus = args.corpus.resolve()
    if args.limit:
        sub = tmp / "corpus"
        files = sorted(p for p in corpus.rglob("*") if p.is_file())[: args.limit]
        for p in files:
            (sub / p.relative_to(corpus)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, sub / p.relative_to(corpus))
        corpus = sub
    args.backend = args.backend or "torch"
    _, model = make_embedder(Variant(args.backend, args.backend), args.cache / "models", 16)
    model(["warm up"])

    cfg = load_config(None, roots=[corpus], overrides={"embedding": {"backend": args.backend}})
    state = tmp / "state"
    eng = Engine(cfg, state, embed_model=model)
    name = next(iter(eng.context.sources))
    t0 = time.perf_counter()
    res = eng.sync(name)
    pipeline_s = time.perf_counter() - t0
    texts: list[str] = []
    for rel in sorted(eng.resources.manifest.documents(name)):
        prep = eng.preparer.prepare(name, rel)
        texts.extend(c.embed_text for c in prep.chunks)
    eng.close()
    # the pipeline embeds each distinct text once: compare on the distinct texts
    distinct = list(dict.fromkeys(texts))
    t0 = time.perf_counter()
    model(distinct)
    raw_s = time.perf_counter() - t0
    pipe_rate = res.embedded / pipeline_s
    raw_rate = len(distinct) / raw_s
    print(f"corpus: {corpus} ({res.indexed} documents, {res.failed} failed); {args.backend}")
    print(
        f"pipeline: {res.chunks_written} chunks written, {res.embedded} embedded "
        f"in {pipeline_s:.1f} s = {pipe_rate:.1f} chunks/s"
    )
    print(f"raw embedding: {len(distinct)} texts in {raw_s:.1f} s = {raw_rate:.1f} chunks/s")
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


# -- threads: intra-op threads of the default backend, on this machine as it is now --------


def threads_main(args: argparse.Namespace) -> None:
    """Chunks/s and chunks per CPU second of the default backend at 1, 2, ... threads.

    Run it on an idle machine and on a busy one (the load average is printed): on a busy
    machine extra threads wait for cores and spin, so wall-clock speed can fall while the
    CPU spent per chunk rises.
    """
    from ingestd.daemon.config.models import default_backend

    backend = args.backend or default_backend()
    counts = [int(x) for x in args.thread_counts.split(",")]
    sets = load_dev_sets(args.sets.split(","))
    pool = [t for ds in sets for t in ds.index.texts]
    random.Random(0).shuffle(pool)
    sample = pool[: args.sample]
    models = {}
    for n in counts:
        _, model = make_embedder(Variant(backend, backend), args.cache / "models", 16, n)
        model(sample[:4])
        models[n] = model
    print(cpu_line())
    print(f"{backend}, {len(sample)} chunks per round; load average before: {_load()}")
    wall: dict[int, list[float]] = {n: [] for n in counts}
    cpu: dict[int, list[float]] = {n: [] for n in counts}
    for r in range(args.rounds):
        for n in counts if r % 2 == 0 else counts[::-1]:
            t0, c0 = time.perf_counter(), time.process_time()
            models[n](sample)
            wall[n].append(time.perf_counter() - t0)
            cpu[n].append(time.process_time() - c0)
    print(f"load average after: {_load()}")
    base = statistics.median(wall[counts[0]])
    for n in counts:
        w, c = statistics.median(wall[n]), statistics.median(cpu[n])
        print(
            f"  threads {n}: {len(sample) / w:7.1f} chunks/s ({base / w:.2f}x threads "
            f"{counts[0]}), {len(sample) / c:7.1f} chunks per CPU second"
        )


# -- cold ingest: the default backend against torch, whole pipeline --------------------------


#: ``embedding.keep_alive_s`` of the daemons whose memory is measured (default 300 s)
BENCH_KEEP_ALIVE_S = 30.0


def _subset(corpus: Path, limit: int, dest: Path) -> Path:
    if not limit:
        return corpus
    files = sorted(p for p in corpus.rglob("*") if p.is_file())[:limit]
    for p in files:
        (dest / p.relative_to(corpus)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest / p.relative_to(corpus))
    return dest


def cold_ingest(backend: str, model: Any, corpus: Path, state: Path, threads: int | None) -> Any:
    """One cold ingest of ``corpus`` into a fresh ``state``; returns (SyncResult, seconds)."""
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    emb = {"backend": backend, "threads": threads}
    cfg = load_config(None, roots=[corpus], overrides={"embedding": emb})
    eng = Engine(cfg, state, embed_model=model)
    try:
        name = next(iter(eng.context.sources))
        t0 = time.perf_counter()
        res = eng.sync(name)
        return res, time.perf_counter() - t0
    finally:
        eng.close()


def _vmrss(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    m = re.search(r"^VmRSS:\s*(\d+) kB", status, re.M)
    return int(m.group(1)) / 1024 if m else float("nan")


def daemon_rss(
    backend: str, corpus: Path, state: Path, models: Path, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """VmRSS (MB) of ``ingestd run`` serving ``state``: with the model loaded, and idle.

    Loaded: 5 s after its first reconcile (the model preloaded). Idle: once the model
    has been let go after ``embedding.keep_alive_s`` (set to :data:`BENCH_KEEP_ALIVE_S`
    here; 300 s by default).
    """
    import json

    cfg = state.parent / f"{backend}.json"
    cfg.write_text(
        json.dumps(
            {
                "sources": [{"name": "bench", "root": str(corpus)}],
                "embedding": {
                    "backend": backend,
                    "cache_dir": str(models),
                    "keep_alive_s": BENCH_KEEP_ALIVE_S,
                },
            }
        )
    )
    base = [sys.executable, "-m", "ingestd.daemon"]
    run = [*base, "run", "--config", str(cfg), "--state-dir", str(state)]
    env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

    def daemon() -> dict[str, Any]:
        st = subprocess.run(
            [*base, "status", "--json", "--config", str(cfg), "--state-dir", str(state)],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        return (json.loads(st.stdout or "{}") or {}).get("daemon") or {}

    def wait(what: str, ready: Callable[[dict[str, Any]], bool]) -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if ready(daemon()):
                return
            time.sleep(1.0)
        raise RuntimeError(f"ingestd run ({backend}): {what} never came")

    try:
        wait(
            "the watching phase with the model loaded",
            lambda d: d.get("phase") == "watching" and d.get("model_loaded") is True,
        )
        time.sleep(5.0)  # let the search pools and the allocator settle
        loaded = _vmrss(proc.pid)
        wait("the model's unloading", lambda d: d.get("model_loaded") is False)
        time.sleep(5.0)
        return loaded, _vmrss(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)


def cold_variants(args: argparse.Namespace) -> list[Variant]:
    """torch, then the default of each install on this CPU, and of a CPU without bfloat16.

    ``onnx``: the default install's. Where OpenVINO is installed (the ``openvino`` extra,
    the default then): ``openvino f32`` (bfloat16 turned off: a CPU without it), and on
    a CPU with bfloat16 ``openvino`` (in bfloat16). ``--backends`` names other labels of
    :func:`variants` instead.
    """
    from dataclasses import replace

    from ingestd.store.embedding.backends import BackendUnavailableError, check_backend
    from ingestd.store.embedding.runtimes.cpu import native_bf16

    known = {v.label: v for v in variants(False)}
    if args.backends:
        return [known["torch"]] + [known[b] for b in args.backends.split(";") if b != "torch"]
    out = [known["torch"], known["onnx"]]
    try:
        check_backend("openvino")
    except BackendUnavailableError:
        return out
    out.append(known["openvino f32"])
    if native_bf16():
        out.append(replace(known["openvino"], label="openvino bf16", bf16=True))
    return out


def cold_main(args: argparse.Namespace) -> None:
    vs = cold_variants(args)
    print(cpu_line())
    print(f"backends: {', '.join(v.label for v in vs)}; threads: {args.threads or 'one per core'}")
    tmp = Path(tempfile.mkdtemp(prefix="ingestd-bench-cold-"))
    try:
        corpus = _subset(args.corpus.resolve(), args.limit, tmp / "corpus")
        models = {}
        for v in vs:
            _, model = make_embedder(v, args.cache / "models", 16, args.threads)
            model(["warm up"])  # load, and export the graph, outside the timing
            models[v.label] = model
        print(f"load average before: {_load()}")
        rates: dict[str, list[float]] = {v.label: [] for v in vs}
        states: dict[str, Path] = {}
        loads = []
        for r in range(args.rounds):
            order = list(enumerate(vs))
            for k, v in order if r % 2 == 0 else order[::-1]:  # neither goes always first
                state = tmp / f"state-{k}-{r}"  # fresh: the store and embedding cache
                res, secs = cold_ingest(v.backend, models[v.label], corpus, state, args.threads)
                rates[v.label].append(res.embedded / secs)
                if v.label in states:
                    shutil.rmtree(states[v.label], ignore_errors=True)
                states[v.label] = state
            loads.append(os.getloadavg()[0])
            line = " ".join(f"{label}={rs[-1]:.1f}" for label, rs in rates.items())
            print(f"  round {r + 1}: chunks/s {line}; load {loads[-1]:.1f}", file=sys.stderr)
        print(
            f"load average after: {_load()}; 1-min load over the rounds {min(loads):.1f} "
            f"to {max(loads):.1f}"
        )
        print(
            f"cold ingest of {corpus.name} ({res.indexed} documents, {res.embedded} chunks "
            f"embedded), {args.rounds} interleaved rounds:"
        )
        for v in vs:
            line = f"  {v.label:<22} {statistics.median(rates[v.label]):8.1f} chunks/s (median)"
            if v.label != "torch":
                pairs = zip(rates[v.label], rates["torch"], strict=True)
                ratio = statistics.median(x / t for x, t in pairs)
                line += f", {ratio:.2f}x torch (target >= 1.8x: "
                line += f"{'MET' if ratio >= 1.8 else 'NOT MET'})"
            print(line)
        del models  # the RSS is measured in fresh processes
        for v in vs:
            state = states[v.label]
            loaded, idle = daemon_rss(v.backend, corpus, state, args.cache / "models", bf16_env(v))
            mark = ""
            if v.label != "torch":
                ok = idle <= 250 and loaded <= 350
                mark = f" (targets <= 350 / 250 MB: {'MET' if ok else 'NOT MET'})"
            print(
                f"  RSS of ingestd run, {v.label}: {loaded:.0f} MB with the model loaded, "
                f"{idle:.0f} MB idle (model let go after keep_alive_s){mark}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def daemon_rss_main(args: argparse.Namespace) -> None:
    """Only the daemons' memory: each ingests the subset at start-up, then idles."""
    tmp = Path(tempfile.mkdtemp(prefix="ingestd-bench-rss-"))
    try:
        corpus = _subset(args.corpus.resolve(), args.limit, tmp / "corpus")
        for k, v in enumerate(cold_variants(args)):
            state = tmp / f"state-{k}"
            loaded, idle = daemon_rss(v.backend, corpus, state, args.cache / "models", bf16_env(v))
            print(f"  RSS of ingestd run, {v.label}: {loaded:.0f} MB loaded, {idle:.0f} MB idle")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only",
        default="speed,recall,rss",
        help="comma-separated parts: speed, recall, rss; or pipeline, cold, daemon-rss "
        "(default: the three)",
    )
    ap.add_argument("--variants", action="store_true", help="also the other ONNX recipes tried")
    ap.add_argument("--backends", help="only these labels (';'-separated; torch always runs)")
    ap.add_argument(
        "--sets",
        default=",".join(s[0] for s in DEV_SETS),
        help="dev sets (comma-separated; default: all four, which the recall bound needs)",
    )
    ap.add_argument("--sample", type=int, default=256, help="chunks timed per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/bench-ingest"))
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="pipeline: the tree")
    ap.add_argument("--limit", type=int, default=0, help="pipeline: first N files only")
    ap.add_argument(
        "--backend", help="pipeline (default torch), threads (default: the default backend)"
    )
    ap.add_argument(
        "--threads", type=int, default=None, help="cold: torch's threads, ONNX texts at once"
    )
    ap.add_argument("--thread-counts", default="1,2", help="threads: the counts compared")
    ap.add_argument("--rss-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.rss_child:
        rss_child(args.rss_child, args.cache / "models")
    elif args.only == "pipeline":
        pipeline_main(args)
    elif args.only == "cold":
        cold_main(args)
    elif args.only == "daemon-rss":
        daemon_rss_main(args)
    elif args.only == "threads":
        threads_main(args)
    else:
        backends_main(args)


if __name__ == "__main__":
    main()
