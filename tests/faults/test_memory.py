"""Memory stays flat while files are rewritten for ever.

The bug this pins: rewriting a few 12,000-character files once a second under
``ingestd run``, RSS rose from 620 to 739 MB in nine minutes with no plateau. Two
things grew: the embedded store kept every deleted point (qdrant-client's local mode
only marks it deleted; id, payload and vector stay until the client is reopened), and
the per-process piece and word tables of ``chunkers/sizing/pieces.py`` could each hold a
million entries (~130 bytes each) of ever new tokens. ``bench/soak.py`` measures the
whole daemon; these tests pin each bound.

A third thing grew once those were bounded: the free memory glibc kept in its heaps,
scattered between live blocks by embedding batches of ever other shapes (free bytes
131 -> 211 MB in 100 edits with the real model, the bytes in use +12 MB). The engine
now gives free pages back after each sync that wrote (``ingestd.daemon.sync.memory``), and
forgets the word tables first: they live for one sync.

A fourth grew in native memory: oneDNN's primitive cache, which torch fills with one
compiled GELU kernel per input shape (up to 1,024), held between short-lived tensors.
The torch backend runs with that cache off unless the environment sets it.
"""

from __future__ import annotations

import gc
import os
import platform
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.daemon.sync.memory import release_free_memory
from ingestd.daemon.sync.writing import applier as applier_module
from ingestd.store.vectors.base import Point
from ingestd.store.vectors.client import qdrant as qdrant_store
from ingestd.store.vectors.client.qdrant import QdrantStore
from tests.helpers import fake_vectors, make_engine

GLIBC = platform.libc_ver()[0] == "glibc"


def _points(n: int, round_: int) -> list[Point]:
    rng = np.random.default_rng(round_)
    text = "x" * 1000
    return [
        Point(
            f"00000000-0000-4000-8000-{round_:06d}{i:06d}",
            rng.standard_normal(384).astype(np.float32),
            {"path": f"r{round_}.md", "text": text},
        )
        for i in range(n)
    ]


def test_the_embedded_store_gives_deleted_points_back(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(qdrant_store, "COMPACT_MIN_DELETED", 50)
    store = QdrantStore(path=str(scratch / "qdrant"), engine="local")
    store.ensure_collection("c", 384)
    live = _points(20, 0)
    store.upsert("c", live)

    def rewrite(round_: int) -> None:
        pts = _points(50, round_)
        store.upsert("c", pts)
        store.delete("c", [p.id for p in pts])

    tracemalloc.start()
    try:
        for r in range(1, 6):
            rewrite(r)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for r in range(6, 26):  # 1,000 points written and deleted: ~3.5 MB if kept
            rewrite(r)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1_000_000, f"{grown / 1e6:.1f} MB kept for deleted points"
    assert sorted(pid for pid, _ in store.scroll("c")) == sorted(p.id for p in live)
    store.close()


def test_piece_and_word_tables_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from ingestd.chunkers.sizing import pieces
    from ingestd.daemon.config import load_config
    from ingestd.daemon.sync.preparing.rules import RuleSet, build_context
    from ingestd.store.embedding.embedder import model_info

    monkeypatch.setattr(pieces, "_CACHE_MAX", 2000)
    monkeypatch.setattr(pieces, "_WORDS_MAX", 2000)
    cfg = load_config(None, roots=[Path.cwd()])
    ctx, tok = build_context(cfg, embed=None)
    rules = RuleSet(cfg.rules, ctx, tok, model_info(cfg.embedding.model).fingerprint)
    chunker = rules.match("a.md").chunker
    for n in range(20):  # 20 x 1,000 words never seen before
        words = " ".join(f"tok{n}x{i:04d}q" for i in range(1000))
        chunker.chunk(f"# Page {n}\n\n{words}\n")
    tables = [o for o in gc.get_objects() if type(o) is pieces.PieceTable]
    assert tables
    for t in tables:
        assert len(t._cache) <= 2001 + 1000 and len(t._segment_words) <= 2001 + 1000


def _rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_free_memory_between_live_blocks_goes_back_to_the_system() -> None:
    # 96 MB of 64 KB blocks (below glibc's mmap threshold: they live in the heap), then
    # every block freed but each 16th: 90 MB free, scattered, none of it at the top
    blocks = [bytes(64 * 1024) for _ in range(1536)]
    kept = blocks[15::16]
    del blocks
    gc.collect()
    before = _rss_bytes()
    assert release_free_memory()
    given_back = before - _rss_bytes()
    assert given_back > 45 * 2**20, f"only {given_back / 2**20:.1f} MB given back"
    assert len(kept) == 96


def test_a_sync_that_wrote_gives_free_memory_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def counting() -> bool:
        calls.append(1)
        return True

    monkeypatch.setattr(applier_module, "release_free_memory", counting)
    root = tmp_path / "docs"
    root.mkdir()
    doc = root / "a.md"
    doc.write_text("# A\n\nFirst words about collectors.\n", encoding="utf-8")
    eng: Any = make_engine(root, tmp_path / "state", fake_vectors)
    try:
        source = next(iter(eng.context.sources))
        assert eng.sync(source).indexed == 1
        assert len(calls) == 1
        assert eng.sync(source).indexed == 0  # nothing written: nothing to give back
        assert len(calls) == 1
        doc.write_text("# A\n\nOther words about exporters.\n", encoding="utf-8")
        eng.sync(source, ["a.md"])
        doc.unlink()
        eng.sync(source, ["a.md"])
        assert len(calls) == 3
    finally:
        eng.close()


def test_word_tables_of_the_sparse_vectors_are_bounded() -> None:
    from ingestd.store.search import sparse

    for n in range(2):  # 2 x 35,000 terms never seen before: past the bound
        sparse.document_vector(" ".join(f"tok{n}x{i:05d}q" for i in range(35_000)))
    for table in (sparse._stem, sparse.term_id):
        info = table.cache_info()
        assert info.maxsize is not None and info.maxsize <= 1 << 16
        assert info.currsize <= 1 << 16


def test_word_tables_live_for_one_sync(tmp_path: Path) -> None:
    """After a sync that wrote, the chunkers' and BM25's word tables hold nothing."""
    from ingestd.chunkers.sizing import pieces, tokenizers
    from ingestd.store.search import sparse

    def remembered() -> dict[str, int]:
        tables = [o for o in gc.get_objects() if type(o) is pieces.PieceTable]
        rules = list(tokenizers._LIVE_RULES)
        return {
            "piece tables": pieces.piece_table.cache_info().currsize,
            "pieces": sum(len(t._cache) + len(t._segment_words) for t in tables),
            "model words": sum(r.word.cache_info().currsize for r in rules),
            "stems": sparse._stem.cache_info().currsize,
            "term ids": sparse.term_id.cache_info().currsize,
        }

    root = tmp_path / "docs"
    root.mkdir()
    words = " ".join(f"req-{i:06x} collector{i}" for i in range(300))
    (root / "a.md").write_text(f"# A\n\nFirst words: {words}.\n", encoding="utf-8")
    eng: Any = make_engine(root, tmp_path / "state", fake_vectors)
    try:
        source = next(iter(eng.context.sources))
        pieces.piece_table.cache_clear()  # tables of earlier tests
        eng.profiles.profile.rules.match("a.md").chunker.chunk("# B\n\nSome words to count.\n")
        before = sparse.document_vector(f"First words: {words}.")
        assert all(remembered().values()), remembered()  # the tables are in use...
        assert eng.sync(source).indexed == 1
        gc.collect()
        assert not any(remembered().values()), remembered()  # ... and empty after a sync
        assert sparse.document_vector(f"First words: {words}.") == before  # recounted alike
    finally:
        eng.close()


_EMBED_TWICE = """
from ingestd.store.embedding.embedder import BUNDLED_MODEL, load_embedder, model_info
embed = load_embedder(model_info(BUNDLED_MODEL))
embed(["the same text, twice"])
embed(["the same text, twice"])
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("capacity", "kept"),
    [
        (None, False),
        ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", True),
        ("DNNL_PRIMITIVE_CACHE_CAPACITY", True),
    ],
    ids=["default", "environment", "environment-old-name"],
)
def test_the_real_model_keeps_no_compiled_kernels(capacity: str | None, kept: bool) -> None:
    """oneDNN recompiles a kernel for a shape seen before: nothing accumulates per shape.

    ``ONEDNN_VERBOSE=all`` makes oneDNN log each primitive it creates, ``cache_hit`` or
    ``cache_miss``; the same text embedded twice hits only if kernels are kept. An
    explicit capacity in the environment wins, under oneDNN's current or former name.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONEDNN_", "DNNL_"))}
    env["ONEDNN_VERBOSE"] = "all"
    if capacity is not None:
        env[capacity] = "1024"
    out = subprocess.run(
        [sys.executable, "-c", _EMBED_TWICE],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    created = [line for line in out.splitlines() if ",primitive,create:" in line]
    if not created:
        pytest.skip("this torch build runs the model without oneDNN primitives")
    assert any("create:cache_miss" in line for line in created)
    assert any("create:cache_hit" in line for line in created) is kept, created[:4]
