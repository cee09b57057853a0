"""bench/_page_evidence.py: page-level evidence re-ranks the best-hit page order by RRF.

A page whose title and path name the question's words leads page BM25F though its best
chunk ranks second, and RRF with the best-hit order breaks the tie toward the best hit.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ingestd.store.search.sparse import query_vector

BENCH = Path(__file__).resolve().parent.parent / "bench"

pytestmark = pytest.mark.engine("edge")  # no store here


@pytest.fixture
def pe(monkeypatch: pytest.MonkeyPatch) -> Any:
    """bench/_page_evidence.py, with bench/ importable while the test runs."""
    monkeypatch.syspath_prepend(str(BENCH))
    import _page_evidence

    return _page_evidence


def _index() -> Any:
    paths = ["guide/styles.md", "guide/styles.md", "widgets/button.md"]
    texts = [
        "Styles\nPadding adds space inside a widget's border.",
        "Styles\nMargin adds space outside.",
        "Button\nA button has padding of one cell around its label by default.",
    ]
    titles = ["Styles", "Styles", "Button"]
    heads = [("Styles", "Padding"), ("Styles", "Margin"), ("Button",)]
    return SimpleNamespace(paths=paths, texts=texts, titles=titles, heads=heads)


def test_page_outline_holds_the_title_then_each_heading_once(pe: Any) -> None:
    pages, outlines = pe.outlines(_index())
    assert pages == ["guide/styles.md", "widgets/button.md"]
    assert outlines == ["Styles\nPadding\nMargin", "Button"]


def test_page_bm25f_puts_the_page_whose_title_and_path_name_the_words_first(pe: Any) -> None:
    pi = pe.PageIndex.build(_index(), np.zeros((2, 3)))
    q = query_vector("button label padding")
    plain, fielded = pi.lexical(q, "bm25"), pi.lexical(q, "bm25f")
    assert fielded["widgets/button.md"] > fielded["guide/styles.md"] > 0
    assert fielded["widgets/button.md"] > plain["widgets/button.md"]  # title and path count


def test_rrf_with_the_best_hit_order_lets_agreeing_evidence_move_a_page_up(pe: Any) -> None:
    maxp = ["guide/styles.md", "widgets/button.md", "styles/margin.md"]
    one = {"widgets/button.md": 2.0, "guide/styles.md": 1.0}
    assert pe.fuse(maxp, [("bm25f", one)]) == maxp  # one list each way: the best hit wins
    two = [("bm25f", one), ("outline", {"widgets/button.md": 0.9, "guide/styles.md": 0.1})]
    assert pe.fuse(maxp, two)[:2] == ["widgets/button.md", "guide/styles.md"]
    # a page sharing no term with the question takes no BM25 rank
    assert pe.fuse(maxp, [("bm25", {"styles/margin.md": 0.0})]) == maxp
