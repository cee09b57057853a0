"""Chunks that are not prose are left out, and only they; a file with no prose is skipped.

Before, a file with more than 32 such chunks, over a tenth of its chunks, was skipped
whole: a 338-page DocBook manual printed by Apache FOP lost its 881 prose chunks. A 2 MB
base64 line in a code fence makes 10,384 chunks: about an hour of embedding on two busy
cores, for chunks no question ever finds, so none of them is ever embedded.
"""

from __future__ import annotations

import base64
import random
import time
from pathlib import Path

import pytest

from ingestd.chunkers.base import Chunk
from ingestd.daemon.sync.preparing.nonprose import is_prose, leave_out_nonprose, nonprose_error
from tests.helpers import CountingEmbedder, make_engine

PROSE = "A sentence of prose with spaces between its words. " * 3


def _chunk(text: str, parent: int | None = None, is_parent: bool = False) -> Chunk:
    return Chunk(
        text=text,
        start=0,
        end=len(text),
        start_line=1,
        end_line=1,
        n_tokens=1,
        parent=parent,
        is_parent=is_parent,
    )


def _manual(root: Path, rng: random.Random, sections: int, blob_bytes: int) -> None:
    """A manual of ``sections`` prose sections, one holding a base64 listing."""
    topics = ["exporters", "sampling", "batching", "retries", "compression", "receivers"]
    parts = ["# Manual\n"]
    for i in range(sections):
        topic = topics[i % len(topics)]
        parts.append(
            f"\n## Section {i}: {topic}\n\nThis section explains how {topic} work in "
            f"release {i}. The collector applies {topic} before the data leaves the "
            f"process, and a restart keeps the {topic} settings of section {i}.\n"
        )
        if i == sections // 2:
            blob = base64.b64encode(rng.randbytes(blob_bytes)).decode()
            parts.append(f"\n```\n{blob}\n```\n")
    (root / "manual.md").write_text("".join(parts))


def test_prose_code_and_cjk_are_prose_blobs_are_not() -> None:
    rng = random.Random(0)
    blob = base64.b64encode(rng.randbytes(300)).decode()
    assert not is_prose(blob)
    assert not is_prose("^" * 300)
    assert is_prose("The collector exports spans to the backend in batches of 512. " * 4)
    assert is_prose('{"level":"info","ts":"2025-04-20T15:01:02Z","msg":"connected to server"}')
    assert is_prose("这是一个关于收集器如何导出跨度的中文段落，没有空格分隔单词。" * 4)
    assert is_prose("short")


def test_only_the_blob_chunks_of_a_mostly_blob_page_are_left_out() -> None:
    blob = [_chunk("x" * 200)] * 40
    prose = [_chunk(PROSE)] * 10
    assert nonprose_error(blob + prose) is None  # 40 of 50: the file keeps its prose
    kept, left_out = leave_out_nonprose(blob + prose)
    assert (len(kept), left_out) == (10, 40)
    assert all(is_prose(c.embed_text) for c in kept)


def test_a_file_with_no_prose_is_skipped_whole_short_tails_do_not_count() -> None:
    error = nonprose_error([_chunk("x" * 200)] * 40 + [_chunk("x;")])
    assert error is not None and "all 40 chunks" in error
    assert nonprose_error([_chunk("short")]) is None  # nothing long enough to judge


def test_parents_are_renumbered_and_a_parent_with_no_child_left_goes() -> None:
    chunks = [
        _chunk(PROSE, is_parent=True),  # 0: keeps child 2
        _chunk("x" * 200, parent=0),
        _chunk(PROSE, parent=0),
        _chunk("y" * 200, is_parent=True),  # 3: its only child is a blob
        _chunk("y" * 200, parent=3),
        _chunk(PROSE, is_parent=True),  # 5
        _chunk(PROSE, parent=5),
    ]
    kept, left_out = leave_out_nonprose(chunks)
    assert left_out == 2
    assert [(c.is_parent, c.parent) for c in kept] == [
        (True, None),
        (False, 0),
        (True, None),
        (False, 2),
    ]


def test_base64_and_one_character_files_are_skipped_blob_pages_lose_only_blobs(
    tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    rng = random.Random(1)
    blob = base64.b64encode(rng.randbytes(60_000)).decode()
    (root / "b64.txt").write_text(blob + "\n")
    (root / "caret.txt").write_text("^" * 50_000 + "\n")
    _manual(root, rng, sections=8, blob_bytes=30_000)
    eng = make_engine(root, tmp_path / "state", fake_embedder)
    try:
        (name,) = eng.context.sources
        res = eng.sync(name)
        assert (res.indexed, res.failed) == (1, 2)
        failed = dict(eng.resources.manifest.failed(name))
        assert set(failed) == {"b64.txt", "caret.txt"}
        assert "not prose: all" in failed["b64.txt"]
        ((path, note),) = eng.resources.manifest.partly_skipped(name)
        assert path == "manual.md" and "chunks not prose" in note
        assert not any(not is_prose(t) for t in fake_embedder.texts)  # no blob embedded
        for i in range(8):  # every section's prose
            assert any(f"in release {i}." in t for t in fake_embedder.texts), i
        assert eng.verify(name).clean  # the oracle applies the same policy
    finally:
        eng.close()


@pytest.mark.slow
def test_a_manual_with_a_blob_listing_is_searchable_and_status_says_partly_skipped(
    tmp_path: Path, real_embedder: CountingEmbedder
) -> None:
    from ingestd.daemon.commands.query.search import search
    from ingestd.daemon.commands.status import status_of
    from ingestd.daemon.commands.status_text import status_lines

    root = tmp_path / "docs"
    root.mkdir()
    _manual(root, random.Random(2), sections=6, blob_bytes=20_000)
    eng = make_engine(root, tmp_path / "state", real_embedder)
    try:
        (name,) = eng.context.sources
        res = eng.sync(name)
        assert (res.indexed, res.failed) == (1, 0)
        (src,) = status_of(eng.resources.manifest, eng, eng.resources.paths.root)["sources"]
        assert src["failed"] == 0 and src["partly_skipped"] == 1
        (doc,) = src["partly_skipped_documents"]
        left_out = int(doc["note"].split(" of ")[0])
        assert left_out > 32 and left_out > src["chunks"]  # the old rule skipped it whole
        st = status_of(eng.resources.manifest, eng, eng.resources.paths.root)
        text = "\n".join(status_lines(st, time.time()))
        assert f"partly skipped manual.md: {left_out} of " in text
        hits = search(eng, "how does compression work in release 4?", k=1, mode="dense")
        assert hits[0]["path"] == "manual.md" and "release 4" in hits[0]["text"]
    finally:
        eng.close()
