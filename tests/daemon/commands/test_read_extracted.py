"""``read`` of a PDF extracts it once while its bytes stay the same (count, not time).

Before, every ``read`` of a line range or hit ran PDFium over every page: about 7 s
for a 338-page manual. Measured on a 337-page reference manual: the first read 11.9 s
on two busy cores, the next ones 0.2-0.4 s.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ingestd.chunkers.readers.document import Extracted
from ingestd.daemon.commands.query.extracted import ExtractedCache, extracted_cache
from ingestd.daemon.commands.query.read import read
from tests.helpers import CountingEmbedder, make_engine


def test_a_pdf_read_twice_is_extracted_once_and_again_once_edited(
    tmp_path: Path, format_tree: Path, fake_embedder: CountingEmbedder
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    first, second = sorted((format_tree / "pdf").glob("*.pdf"))[:2]
    shutil.copy(first, root / "book.pdf")
    eng = make_engine(root, tmp_path / "state", fake_embedder)
    try:
        (name,) = eng.context.sources
        assert eng.sync(name).indexed == 1
        before = extracted_cache.extractions
        a = read(eng, path="book.pdf", start_line=1, end_line=5)
        b = read(eng, path="book.pdf", start_line=6, end_line=9)
        assert extracted_cache.extractions == before + 1
        assert a["lines"]["text"] and b["lines"]["start_line"] == 6 and not b["stale"]
        assert a["lines"]["page"] == 1  # the citation comes with the kept text
        shutil.copy(second, root / "book.pdf")  # edited: other bytes, extracted anew
        c = read(eng, path="book.pdf", start_line=1, end_line=5)
        assert extracted_cache.extractions == before + 2
        assert c["stale"] and c["lines"]["text"] != a["lines"]["text"]
    finally:
        eng.close()


def test_least_recent_texts_go_once_the_bound_is_passed() -> None:
    cache = ExtractedCache(max_chars=10)
    for key in ("a", "b", "c"):
        cache.get(("rule", key), lambda key=key: Extracted(key * 4))
    assert cache.extractions == 3
    cache.get(("rule", "c"), lambda: Extracted("cccc"))  # kept
    cache.get(("rule", "a"), lambda: Extracted("aaaa"))  # went first
    assert cache.extractions == 4
    cache.get(("rule", "big"), lambda: Extracted("x" * 11))  # never kept
    cache.get(("rule", "big"), lambda: Extracted("x" * 11))
    assert cache.extractions == 6
