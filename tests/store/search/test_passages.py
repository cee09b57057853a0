"""Passages: hits of one document merged when they overlap or touch, within a budget."""

from __future__ import annotations

from typing import Any

import pytest

from ingestd.store.search.pages import page_scores
from ingestd.store.search.passages import fill

DOC = "".join(f"line {i:02d} of the page\n" for i in range(40))  # 40 lines of 20 chars


def words(text: str) -> int:
    return len(text.split())


def hit(start_line: int, end_line: int, ordinal: int, *, path: str = "a.md") -> dict[str, Any]:
    """A hit over lines ``start_line..end_line`` (1-based) of :data:`DOC`."""
    start = (start_line - 1) * 20
    end = end_line * 20 - 1  # the chunk ends before its last line end
    return {
        "id": f"{path}#{ordinal}",
        "score": 1.0 / (ordinal + 1),
        "source": "s",
        "path": path,
        "doc_hash": "h",
        "ordinal": ordinal,
        "start_char": start,
        "end_char": end,
        "start_line": start_line,
        "end_line": end_line,
        "heading_path": ["Guide", f"part {start_line}"],
        "text": DOC[start:end],
    }


def test_touching_and_overlapping_hits_of_a_page_make_one_verbatim_passage() -> None:
    last = hit(1, 2, 0, path="b.md") | {"score": 0.05}
    hits = [hit(5, 8, 2), hit(9, 12, 3), hit(11, 14, 4), hit(30, 31, 9), last]
    got = fill(hits, 1000, words)
    assert [p.ids for p in got] == [["a.md#2", "a.md#3", "a.md#4"], ["a.md#9"], ["b.md#0"]]
    first = got[0]
    assert first.text == DOC[first.start_char : first.end_char]  # the line end between them
    assert (first.start_line, first.end_line, first.rank) == (5, 14, 1)
    assert first.heading_path == ["Guide"]  # what all its hits are under
    assert first.n_tokens == words(first.text)
    assert sum(p.n_tokens for p in got) == words("\n".join(p.text for p in got))


def test_a_page_is_listed_once_with_its_passages_in_rank_order() -> None:
    # a.md, b.md, a.md again (apart from its first passage), then c.md
    hits = [hit(1, 2, 0), hit(1, 2, 0, path="b.md"), hit(30, 31, 9), hit(5, 6, 2, path="c.md")]
    for i, h in enumerate(hits):
        h["score"] = 1.0 - i / 10
    got = fill(hits, 1000, words)
    assert [(p.path, p.ids) for p in got] == [
        ("a.md", ["a.md#0"]),
        ("a.md", ["a.md#9"]),
        ("b.md", ["b.md#0"]),
        ("c.md", ["c.md#2"]),
    ]
    assert [p.rank for p in got] == [1, 2, 3, 4]
    assert [p.page_rank for p in got] == [1, 1, 2, 3]
    assert got[0].page_score == pytest.approx(1.0)  # its best hit's
    assert got[2].as_dict()["page_rank"] == 2


def test_a_page_score_is_a_decayed_sum_of_its_hits_and_the_best_hit_by_default() -> None:
    hits = [("b", 0.033), ("a", 0.032), ("a", 0.031), ("c", 0.031)]
    assert page_scores(hits) == [("b", 0.033), ("a", 0.032), ("c", 0.031)]  # MaxP
    summed = page_scores(hits, 0.5)
    assert [p for p, _ in summed] == ["a", "b", "c"]
    assert summed[0][1] == pytest.approx(0.032 + 0.5 * 0.031)
    with pytest.raises(ValueError, match="decay"):
        page_scores(hits, 1.5)


def test_a_hit_between_two_passages_bridges_them() -> None:
    got = fill([hit(1, 4, 0), hit(9, 12, 2), hit(5, 8, 1)], 1000, words)
    assert len(got) == 1 and got[0].ids == ["a.md#0", "a.md#1", "a.md#2"]
    assert got[0].text == DOC[: 12 * 20 - 1]


def test_chunks_not_next_to_each_other_stay_apart() -> None:
    # ordinals 2 and 4: a chunk lies between them, so do its words
    got = fill([hit(5, 8, 2), hit(13, 16, 4)], 1000, words)
    assert len(got) == 2


def test_the_budget_takes_the_best_hits_that_fit_and_skips_the_rest() -> None:
    hits = [hit(1, 4, 0), hit(20, 30, 5), hit(35, 36, 8), hit(2, 5, 1, path="c.md")]
    per_line = words(DOC[:19])
    got = fill(hits, 10 * per_line, words)  # 4 + 2 + 4 lines fit, not 11 more
    assert [p.ids[0] for p in got] == ["a.md#0", "a.md#8", "c.md#1"]
    assert [p.rank for p in got] == [1, 2, 3]
    assert sum(p.n_tokens for p in got) <= 10 * per_line


def test_a_merge_costs_only_the_tokens_it_adds() -> None:
    per_line = words(DOC[:19])
    hits = [hit(1, 4, 0), hit(3, 6, 1)]  # overlapping by two lines
    got = fill(hits, 6 * per_line, words)
    assert len(got) == 1 and got[0].n_tokens == 6 * per_line


def test_most_passages_and_per_page_cap() -> None:
    hits = [hit(1, 2, 0), hit(10, 11, 4), hit(3, 4, 1), hit(5, 6, 1, path="b.md")]
    assert [p.ids for p in fill(hits, 1000, words, max_passages=1)] == [["a.md#0", "a.md#1"]]
    capped = fill(hits, 1000, words, per_page=1)
    assert [p.ids for p in capped] == [["a.md#0", "a.md#1"], ["b.md#1"]]


def test_a_best_hit_over_the_budget_is_cut_at_a_line_end() -> None:
    got = fill([hit(1, 10, 0)], 3 * words(DOC[:19]), words)
    assert len(got) == 1 and got[0].truncated
    assert got[0].text == DOC[: 3 * 20 - 1] and got[0].end_line == 3
    with pytest.raises(ValueError, match="at least 1"):
        fill([], 0, words)
    assert fill([], 10, words) == []


def test_a_passage_cites_its_format_from_its_first_hit_to_its_last() -> None:
    """A PDF passage over two hits runs from the first's page to the last's end page; a
    notebook's from the first's cell and line to the last's; both carry their version."""
    v2 = {"version": "v2", "commit": "c2"}
    pdf = [
        {**hit(9, 12, 3), "page": 10, "end_page": 11, **v2},
        {**hit(5, 8, 2), "page": 10, "end_page": 10, **v2},
    ]
    (got,) = fill(pdf, 1000, words)
    cited = {k: v for k, v in got.as_dict().items() if k in ("page", "end_page", *v2)}
    assert cited == {"page": 10, "end_page": 11, **v2}
    cells = [
        {**hit(5, 8, 2), "cell": 3, "end_cell": 3, "cell_start_line": 4, "cell_end_line": 7},
        {**hit(9, 12, 3), "cell": 3, "end_cell": 5, "cell_start_line": 8, "cell_end_line": 2},
    ]
    (got,) = fill(cells, 1000, words)
    d = got.as_dict()
    assert (d["cell"], d["cell_start_line"], d["end_cell"], d["cell_end_line"]) == (3, 4, 5, 2)
    (alone,) = fill([pdf[0]], 1000, words)  # one hit: its own citation
    assert (alone.as_dict()["page"], alone.as_dict()["end_page"]) == (10, 11)


def test_hits_of_two_versions_of_a_file_stay_apart() -> None:
    hits = [{**hit(5, 8, 2), "version": "v1"}, {**hit(9, 12, 3), "version": "v2"}]
    got = fill(hits, 1000, words)
    assert [p.as_dict()["version"] for p in got] == ["v1", "v2"]


def test_a_passage_cut_to_the_budget_keeps_its_hits_citation() -> None:
    (got,) = fill([{**hit(1, 30, 0), "page": 4, "end_page": 6}], 20, words)
    assert got.truncated and (got.as_dict()["page"], got.as_dict()["end_page"]) == (4, 6)
