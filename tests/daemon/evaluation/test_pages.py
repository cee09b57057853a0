"""Page-level metrics against their published definitions, judgements files and run files.

The worked example is computed by hand from trec_eval's definitions (``m_ndcg_cut.c``,
version 9.0: ``DCG@k = sum of gain / log2(rank + 1)`` over the first k ranks, the
gain being the judged grade, normalised by the DCG of the grades sorted best first;
``recall_k``; ``recip_rank``), the nDCG of Järvelin and Kekäläinen (ACM TOIS 20(4),
2002) that BEIR reports through pytrec_eval.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ingestd.daemon.evaluation.pages import PAGE_METRICS, gains, page_values, pages_of
from ingestd.daemon.evaluation.questions import Question, QuestionError, add_judgements
from ingestd.daemon.evaluation.report import format_table, summarise
from ingestd.daemon.evaluation.trec import read_run, write_run


def test_worked_example_matches_trec_eval_definitions() -> None:
    qrels = {"a.md": 3, "b.md": 2, "c.md": 1}
    ranking = ["x.md", "b.md", "c.md", "a.md", "y.md"]
    # gains by rank: 0, 2, 1, 3, 0
    # DCG@5  = 2/log2(3) + 1/log2(4) + 3/log2(5) = 1.2618595 + 0.5 + 1.2920297 = 3.0538892
    # IDCG@5 = 3/log2(2) + 2/log2(3) + 1/log2(4) = 3 + 1.2618595 + 0.5     = 4.7618595
    # nDCG@5 = 3.0538892 / 4.7618595 = 0.6413228
    got = page_values(ranking, qrels)
    assert got["nDCG@5"] == pytest.approx(0.6413228, abs=1e-7)
    assert got["nDCG@10"] == pytest.approx(0.6413228, abs=1e-7)  # nothing past rank 5
    assert got["Hit@5"] == got["Hit@10"] == 1.0
    assert got["R@5"] == got["R@10"] == 1.0  # all three judged pages within 5
    assert got["MRR@10"] == 0.5  # the first relevant page is at rank 2
    # the same by the formula, written out
    dcg = sum(g / math.log2(r + 1) for r, g in enumerate([0, 2, 1, 3, 0], 1))
    idcg = sum(g / math.log2(r + 1) for r, g in enumerate([3, 2, 1], 1))
    assert got["nDCG@5"] == pytest.approx(dcg / idcg)
    # cut-offs: within 1 nothing; a ranking that misses c.md
    short = page_values(["a.md", "z.md", "b.md"], qrels)
    assert short["R@5"] == pytest.approx(2 / 3) and short["MRR@10"] == 1.0
    assert short["nDCG@5"] == pytest.approx((3 + 2 / 2) / idcg)
    assert page_values([], qrels) == dict.fromkeys(PAGE_METRICS, 0.0)


def test_a_folder_judgement_counts_once() -> None:
    qrels = {"guide/": 2, "a.md": 3}
    assert gains(["guide/x.md", "guide/y.md", "a.md"], qrels) == [2, 0, 3]
    got = page_values(["guide/x.md", "guide/y.md", "a.md"], qrels)
    # DCG = 2/log2(2) + 3/log2(4) = 3.5; IDCG = 3 + 2/log2(3) = 4.2618595
    assert got["nDCG@5"] == pytest.approx(0.8212378, abs=1e-7)
    assert got["R@5"] == 1.0
    # a page and the folder it is in: the page takes its own judgement first
    assert gains(["guide/a.md", "guide/b.md"], {"guide/a.md": 1, "guide": 3}) == [1, 3]
    assert pages_of(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="at least one judgement"):
        page_values(["a"], {})


def test_run_files_are_read_in_trec_eval_order(tmp_path: Path) -> None:
    run = tmp_path / "other.run"
    run.write_text(
        "q1 Q0 b.md 1 0.5 sys\n"
        "q1 Q0 a.md 2 0.5 sys\n"  # a tie: trec_eval orders by name, descending
        "q1 Q0 c.md#setup 3 0.9 sys\n"  # the score decides, not the rank column
        "q1 Q0 c.md#other 4 0.1 sys\n"  # the same page again: its first place stays
        "q2 Q0 d.md 1 1 sys\n"
    )
    assert read_run(run) == {"q1": ["c.md", "b.md", "a.md"], "q2": ["d.md"]}
    out = tmp_path / "ours.run"
    write_run(out, {"q1": ["x.md", "y.md"]}, "ingestd")
    assert out.read_text().splitlines() == [
        "q1 Q0 x.md 1 1.000000 ingestd",
        "q1 Q0 y.md 2 0.500000 ingestd",
    ]
    assert read_run(out) == {"q1": ["x.md", "y.md"]}
    run.write_text("q1 Q0 a.md 1\n")
    with pytest.raises(QuestionError, match="other.run:1: expected QID Q0 DOCNO RANK SCORE TAG"):
        read_run(run)


def test_judgements_files_add_qrels_and_questions(tmp_path: Path) -> None:
    qs = [Question("q1", "?", "a.md", "x", "fact", 0, 1)]
    assert qs[0].judgements == {"a.md": 3}
    jl = tmp_path / "j.jsonl"
    jl.write_text(
        json.dumps({"id": "q1", "qrels": {"b.md": 2}})
        + "\n"
        + json.dumps({"id": "c1", "question": "a vs b?", "qrels": {"a.md": 3, "b.md": 3}})
        + "\n"
    )
    got = add_judgements(qs, jl)
    assert [q.id for q in got] == ["q1", "c1"]
    assert got[0].judgements == {"b.md": 2, "a.md": 3} and got[0].has_answer
    assert got[1].judgements == {"a.md": 3, "b.md": 3} and not got[1].has_answer
    trec = tmp_path / "j.qrels"
    trec.write_text("q1 0 c.md 1\nq1 0 d.md 0\n")
    assert add_judgements(qs, trec)[0].judgements == {"c.md": 1, "a.md": 3}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"id": "zz", "qrels": {"a.md": 1}})
        + "\n"
        + json.dumps({"id": "q1", "qrels": {"/etc/passwd": 1}})
        + "\n"
        + json.dumps({"id": "q1", "qrels": {"a.md": 5}})
        + "\n"
    )
    with pytest.raises(QuestionError) as err:
        add_judgements(qs, bad)
    assert str(err.value).splitlines() == [
        f"{bad}:1: no question zz in the set (give its question)",
        f"{bad}:2: qrels target must be relative to the corpus: '/etc/passwd'",
        f"{bad}:3: qrels grade of a.md must be 1, 2 or 3: 5",
    ]


def test_report_scores_rows_and_a_run_at_page_level_side_by_side() -> None:
    qs = [
        Question("q1", "?", "a.md", "x", "fact", 0, 1),
        Question("c1", "a vs b?", "", "", "page", -1, -1, {"a.md": 3, "b.md": 3}),
    ]
    raw = {
        "corpus": "/c",
        "modes": ["hybrid"],
        "questions_embedded": 2,
        "rule_sets": [
            {
                "label": "default rules",
                "documents": 2,
                "chunks": 4,
                "embedded": 4,
                "reused": 0,
                "failed": {},
                "unreadable": [],
                "unindexed": [],
                "split": [],
                "ranks": {"hybrid": [[2, 2], [None, None]]},
                "pages": {"hybrid": [["z.md", "a.md"], ["a.md", "z.md", "b.md"]]},
            }
        ],
    }
    runs = {"other": {"q1": ["a.md"], "c1": ["b.md", "a.md"]}}
    report = summarise(raw, qs, resamples=1000, seed=0, question_set="q", runs=runs)
    (row,) = report["rows"]
    assert report["answered"] == 1 and report["judged"] == 1
    assert row["span"]["R@1"] == 0.0 and row["span"]["MRR@10"] == 50.0  # q1 only
    # q1: a.md at rank 2 -> nDCG@5 = 1/log2(3) = 0.6309; c1: gains 3, 0, 3 -> DCG = 3 + 3/2,
    # IDCG = 3 + 3/log2(3) = 4.8928 -> 0.9197; mean 0.7753
    assert row["pages"]["nDCG@5"] == pytest.approx(77.53, abs=0.01)
    assert row["pages"]["Hit@5"] == 100.0 and row["pages"]["MRR@10"] == 75.0
    (other,) = report["runs"]
    assert other["pages"]["nDCG@5"] == 100.0 and other["missing"] == []
    assert other["vs_first"]["nDCG@5"]["diff"] == pytest.approx(22.47, abs=0.01)
    assert other["pages_ci"]["nDCG@5"] == {"low": 100.0, "high": 100.0}
    text = format_table(report)
    assert "page level: 2 questions" in text and "run other" in text
    assert "1 with a verbatim answer" in text.splitlines()[0] and "span level" in text


#: The dev sets' page-level judgements (bench/qrels) and their corpora.
DEV_SETS = {
    "md-docs": "md-docs",
    "rst-docs": "rst-docs",
    "rust-book": "history/base",
    "mkdocs-docs": "mkdocs-docs",
}


@pytest.mark.parametrize("name", sorted(DEV_SETS))
def test_the_dev_sets_page_judgements_load_and_name_real_pages(name: str) -> None:
    from ingestd.daemon.evaluation.questions import load_questions
    from tests.helpers import CORPORA

    qrels = Path(__file__).parents[3] / "bench" / "qrels" / f"{name}.jsonl"
    corpus = CORPORA / DEV_SETS[name]
    qs = load_questions(CORPORA / "qa" / f"{name}.jsonl", corpus)
    got = add_judgements(qs, qrels)
    added = [q for q in got if not q.has_answer]
    beyond = [q for q in got if q.has_answer and len(q.judgements) > 1]
    assert len(added) >= 3 and beyond  # comparison questions, and dev questions with more pages
    for q in got:
        for target, grade in q.judgements.items():
            assert (corpus / target).exists(), (q.id, target)
            assert grade in (1, 2, 3)
        assert sum(g == 3 for g in q.judgements.values()) >= 1
    # the file alone is a page-level question set too (`ingestd eval QRELS --corpus DIR`)
    alone = load_questions(qrels, corpus)
    assert {q.id for q in alone} == {q.id for q in added} | {q.id for q in beyond}
