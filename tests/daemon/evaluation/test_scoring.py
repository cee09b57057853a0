"""Scoring of ``ingestd eval`` by hand: question sets, first-hit ranks, metrics, bootstrap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.daemon.evaluation.questions import Question, QuestionError, load_questions
from ingestd.daemon.evaluation.scoring import metrics, paired_bootstrap, per_question, rank_hits


def _write_questions(path: Path, rows: list[Any]) -> Path:
    keys = ("id", "question", "path", "answer", "kind")
    path.write_text("".join(json.dumps(dict(zip(keys, r, strict=True))) + "\n" for r in rows))
    return path


def _q(start: int = 100, end: int = 150, path: str = "a.md") -> Question:
    return Question("q", "?", path, "x" * (end - start), "fact", start, end)


def test_rank_hits_counts_a_span_hit_only_when_the_hit_covers_the_whole_answer() -> None:
    q = _q(100, 150)
    hits = [
        ("b.md", 0, 1000),  # another file: no hit at all
        ("a.md", 101, 400),  # the gold file, starts one character late
        ("a.md", 0, 149),  # ends one character early
        ("a.md", -1, 1000),  # offsets unknown: a path hit at most
        ("a.md", 100, 150),  # exactly the answer
    ]
    assert rank_hits(q, hits).path == 2
    assert rank_hits(q, hits).span == 5
    assert rank_hits(q, hits[:4]).span is None
    assert rank_hits(q, []) == rank_hits(q, [("b.md", 100, 150)])
    assert rank_hits(q, []).path is None


def test_metrics_by_hand() -> None:
    ranks = [1, 3, None, 7, 12]
    m = metrics(ranks)
    assert m["R@1"] == pytest.approx(20.0)
    assert m["R@5"] == pytest.approx(40.0)
    assert m["R@10"] == pytest.approx(60.0)
    assert m["MRR@10"] == pytest.approx(100 * (1 + 1 / 3 + 1 / 7) / 5)  # rank 12 counts 0
    assert list(per_question(ranks, "R@5")) == [1, 1, 0, 0, 0]
    with pytest.raises(ValueError, match="unknown metric"):
        per_question(ranks, "R@ten")


def test_paired_bootstrap_by_hand_and_against_the_normal_approximation() -> None:
    same = paired_bootstrap([1, 0, 1, 1], [1, 0, 1, 1])
    assert (same.diff, same.low, same.high) == (0.0, 0.0, 0.0)
    up = paired_bootstrap([0, 0, 0], [1, 1, 1])
    assert (up.diff, up.low, up.high) == (100.0, 100.0, 100.0)
    # 80 questions, 14 won and 4 lost by b: +12.5 points
    a = np.zeros(80)
    b = np.zeros(80)
    b[:14] = 1
    a[14:18] = 1
    iv = paired_bootstrap(a, b, resamples=20_000, seed=3)
    assert iv.diff == pytest.approx(12.5)
    assert iv.low < iv.diff < iv.high
    d = b - a
    half = 100 * 1.96 * d.std() / np.sqrt(d.size)  # the normal interval, for comparison
    assert iv.high - iv.low == pytest.approx(2 * half, rel=0.15)
    assert paired_bootstrap(a, b, resamples=20_000, seed=3) == iv  # the seed fixes it
    with pytest.raises(ValueError):
        paired_bootstrap([1, 0], [1])


def test_load_questions_locates_answers_in_decoded_text_after_front_matter(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    # the answer also occurs in the front matter, and the file has CRLF line ends
    (corpus / "a.md").write_bytes(
        b"\xef\xbb\xbf---\r\ntitle: Use a widget\r\n---\r\n\r\n# Title\r\n\r\nUse a widget.\r\n"
    )
    qs = load_questions(
        _write_questions(tmp_path / "q.jsonl", [("1", "?", "a.md", "Use a widget", "x")]), corpus
    )
    text = "---\ntitle: Use a widget\n---\n\n# Title\n\nUse a widget.\n"
    assert (qs[0].start, qs[0].end) == (
        text.rindex("Use a widget"),
        text.rindex("Use a widget") + 12,
    )


def test_load_questions_reports_every_problem_with_its_line(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("Some text here.\n")
    (corpus / "bin.md").write_bytes(b"\x00\x01binary")
    qa = tmp_path / "q.jsonl"
    qa.write_text(
        "\n".join(
            [
                "{not json",
                json.dumps({"id": "1", "question": "?", "path": "a.md", "kind": "x"}),
                json.dumps(
                    {"id": "2", "question": "?", "path": "a.md", "answer": "Some", "kind": "x"}
                ),
                json.dumps(
                    {"id": "2", "question": "?", "path": "a.md", "answer": "Some", "kind": "x"}
                ),
                json.dumps(
                    {"id": "3", "question": "?", "path": "../a.md", "answer": "S", "kind": "x"}
                ),
                json.dumps(
                    {"id": "4", "question": "?", "path": "b.md", "answer": "S", "kind": "x"}
                ),
                json.dumps(
                    {"id": "5", "question": "?", "path": "a.md", "answer": "absent", "kind": "x"}
                ),
                json.dumps(
                    {"id": "6", "question": "?", "path": "bin.md", "answer": "bin", "kind": "x"}
                ),
            ]
        )
    )
    with pytest.raises(QuestionError) as err:
        load_questions(qa, corpus)
    lines = str(err.value).splitlines()
    assert [ln.split(": ")[0] for ln in lines] == [
        f"{qa}:1",
        f"{qa}:2",
        f"{qa}:4 (2)",
        f"{qa}:5 (3)",
        f"{qa}:6 (4)",
        f"{qa}:7 (5)",
        f"{qa}:8 (6)",
    ]
    assert "answer" in lines[1] and "repeated" in lines[2] and "not found" in lines[5]
