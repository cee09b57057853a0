"""Text that is not prose is skipped by the file policy, the same for a sync and the oracle.

Before, a 2 MB base64 line in a code fence made 10,384 chunks: about an hour of
embedding on two busy cores, for chunks no question ever finds.
"""

from __future__ import annotations

import base64
import random
from pathlib import Path

from ingestd.chunkers.base import Chunk
from ingestd.daemon.sync.preparing.nonprose import is_prose, nonprose_error
from tests.helpers import CountingEmbedder, make_engine


def _chunk(text: str) -> Chunk:
    return Chunk(text=text, start=0, end=len(text), start_line=1, end_line=1, n_tokens=1)


def test_prose_code_and_cjk_are_prose_blobs_are_not() -> None:
    rng = random.Random(0)
    blob = base64.b64encode(rng.randbytes(300)).decode()
    assert not is_prose(blob)
    assert not is_prose("^" * 300)
    assert is_prose("The collector exports spans to the backend in batches of 512. " * 4)
    assert is_prose('{"level":"info","ts":"2025-04-20T15:01:02Z","msg":"connected to server"}')
    assert is_prose("这是一个关于收集器如何导出跨度的中文段落，没有空格分隔单词。" * 4)
    assert is_prose("short")


def test_a_few_blob_chunks_in_a_long_page_are_kept() -> None:
    blob = [_chunk("x" * 200)] * 40
    prose = [_chunk("A sentence of prose with spaces between its words. " * 3)] * 400
    assert nonprose_error(blob + prose, 32) is None  # 40 > 32 but under a tenth
    error = nonprose_error(blob + prose[:10], 32)
    assert error is not None and "40 of 50 chunks" in error


def test_base64_and_one_character_files_are_skipped_with_a_status_entry(
    tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    rng = random.Random(1)
    blob = base64.b64encode(rng.randbytes(60_000)).decode()
    (root / "b64.md").write_text(f"# Blob\n\nProse before.\n\n```\n{blob}\n```\n\nAfter.\n")
    (root / "caret.txt").write_text("^" * 50_000 + "\n")
    (root / "small-blob.md").write_text(
        "# Page\n\n" + "A paragraph of real prose about exporters. " * 400
        + f"\n\n![logo](data:image/png;base64,{blob[:3000]})\n\n```\n{blob[:3000]}\n```\n"
    )  # fmt: skip
    eng = make_engine(root, tmp_path / "state", fake_embedder)
    try:
        (name,) = eng.sources
        res = eng.sync(name)
        assert (res.indexed, res.failed) == (1, 2)
        failed = dict(eng.manifest.failed(name))
        assert set(failed) == {"b64.md", "caret.txt"}
        assert "not prose" in failed["b64.md"]
        assert "files.max_nonprose_chunks 32" in failed["b64.md"]
        assert len(fake_embedder.texts) < 100  # small-blob.md only: its prose and 2 blob pieces
        assert eng.verify(name).clean  # the oracle applies the same policy
    finally:
        eng.close()
