"""Passages: hits of one document merged when they overlap or touch, within a budget."""

from __future__ import annotations

from typing import Any

import pytest

from ingestd.store.search.pages import page_scores
from ingestd.store.search.passages import JOIN_LINES, Passage, fill

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


class Between:
    """``fill``'s ``between`` over :data:`DOC`'s chunks, counting the gaps it is asked."""

    def __init__(self, *chunks: dict[str, Any]) -> None:
        self.chunks, self.asked = chunks, 0

    def __call__(self, a: Passage, b: Passage) -> list[dict[str, Any]]:
        self.asked += 1
        first, last = a.ordinals[1], b.ordinals[0]
        return [c for c in self.chunks if c["path"] == a.path and first < c["ordinal"] < last]


def test_spans_of_a_page_within_join_lines_are_one_span_with_the_lines_between_read() -> None:
    assert JOIN_LINES == 3
    between = Between(hit(9, 11, 3))  # the chunk between: three lines
    hits = [hit(5, 8, 2), hit(1, 2, 0, path="b.md"), hit(12, 14, 4)]
    for i, h in enumerate(hits):
        h["score"] = 1.0 - i / 10
    got = fill(hits, 1000, words, between=between)
    assert [(p.path, p.ids) for p in got] == [
        ("a.md", ["a.md#2", "a.md#3", "a.md#4"]),
        ("b.md", ["b.md#0"]),
    ]
    joined = got[0]
    assert joined.text == DOC[4 * 20 : 14 * 20 - 1]  # lines 5 to 14, verbatim
    assert (joined.start_line, joined.end_line, joined.rank, joined.page_rank) == (5, 14, 1, 1)
    assert joined.score == hits[0]["score"]  # its best hit's; the chunk between adds no score
    assert joined.n_tokens == words(joined.text) and between.asked == 1


def test_spans_further_apart_or_with_a_gap_the_index_cannot_fill_stay_apart() -> None:
    far = Between(hit(9, 12, 3))  # four lines between: one more than JOIN_LINES
    got = fill([hit(5, 8, 2), hit(13, 16, 4)], 1000, words, between=far)
    assert len(got) == 2 and far.asked == 0
    unknown = Between()  # the index holds no chunk between (a stale read)
    got = fill([hit(5, 8, 2), hit(12, 14, 4)], 1000, words, between=unknown)
    assert [p.ids for p in got] == [["a.md#2"], ["a.md#4"]] and unknown.asked == 1
    assert len(fill([hit(5, 8, 2), hit(12, 14, 4)], 1000, words)) == 2  # no between given


def test_a_join_pays_for_the_lines_between_and_the_budget_holds_exactly() -> None:
    hits = [hit(5, 8, 2), hit(12, 14, 4), hit(9, 11, 3)]  # the chunk between ranks third
    whole = words(DOC[4 * 20 : 14 * 20 - 1])
    got = fill(hits, whole, words, between=Between(hits[2]))
    assert len(got) == 1 and got[0].n_tokens == whole  # the third hit costs nothing more
    assert got[0].ids == ["a.md#2", "a.md#3", "a.md#4"]
    short = fill(hits[:2], whole - 1, words, between=Between(hits[2]))
    assert [p.ids for p in short] == [["a.md#2"]]  # the join does not fit: passed over
    assert short[0].n_tokens == words(DOC[4 * 20 : 8 * 20 - 1]) <= whole - 1


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
