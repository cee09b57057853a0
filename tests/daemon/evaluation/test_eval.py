"""``ingestd eval``: scoring by hand, and end to end on a small real tree with the real model.

The tree holds five Sphinx pages, one OpenTelemetry page and a Python file that the
default include globs leave out. Seven questions were written for it: e1-e3 quote
distinctive words of their answer (their gold file comes first whatever the rules and
mode, and for e1 and e3 the first hit covers the answer), e4-e6 have answers longer
than the 32-token windows of the ``tiny`` rules (split there, never a span hit), and e7
asks about the file that is not indexed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.config import ConfigError, load_config
from ingestd.daemon.evaluation.evaluate import EvalPlan
from ingestd.daemon.evaluation.pages import pages_of
from ingestd.daemon.evaluation.questions import Question, load_questions
from ingestd.daemon.evaluation.scoring import metrics, rank_hits
from tests.helpers import (
    CORPORA,
    MD_DOCS,
    REPO,
    CountingEmbedder,
    copy_tree,
    fake_vectors,
    ingestd_cmd,
    make_engine,
    run_cli,
    wait_for,
)

RST = (
    "usage/extensions/githubpages.rst",
    "usage/extensions/ifconfig.rst",
    "usage/extensions/todo.rst",
    "extdev/testing.rst",
    "usage/extensions/imgconverter.rst",
)
MD = ("docs/concepts/signals/baggage.md",)
QUESTIONS = [
    (
        "e1",
        "What marker file does the GitHub Pages extension write into the generated HTML folder?",
        "usage/extensions/githubpages.rst",
        "This extension creates ``.nojekyll`` file on generated HTML directory to publish\n"
        "the document on GitHub Pages.",
        "fact",
    ),
    (
        "e2",
        "Which HTML class does a todo admonition get when the directive has no class option?",
        "usage/extensions/todo.rst",
        "If not given, the class defaults to\n      ``admonition-todo``.",
        "fact",
    ),
    (
        "e3",
        "What line in conftest.py enables the pytest fixtures that Sphinx provides?",
        "extdev/testing.rst",
        "pytest_plugins = ('sphinx.testing.fixtures',)",
        "code",
    ),
    (
        "e4",
        "Which command does the image converter extension run by default on Unix?",
        "usage/extensions/imgconverter.rst",
        ":default: :code-py:`'convert'` on Unix; :code-py:`'magick'` on Windows",
        "config",
    ),
    (
        "e5",
        "When is the content of an ifconfig directive included in the output?",
        "usage/extensions/ifconfig.rst",
        "Include content of the directive only if the Python expression given as an\n"
        "   argument is ``True``, evaluated in the namespace of the project's\n"
        "   configuration (that is, all registered variables from :file:`conf.py` are\n"
        "   available).",
        "definition",
    ),
    (
        "e6",
        "Why can sensitive baggage items leak to third-party APIs?",
        "docs/concepts/signals/baggage.md",
        "This is because automatic instrumentation includes Baggage in\n"
        "most of your service’s network requests.",
        "fact",
    ),
    (
        "e7",
        "What does the square function of the sample module return?",
        "code_sample.py",
        "return x * x",
        "code",
    ),
]
TINY = "rules:\n  - match: ['*']\n    chunker: token\n    params: {max_tokens: 32, overlap: 0}\n"
MODES = ("hybrid", "dense", "sparse")


def _write_questions(path: Path, rows: list[tuple[str, ...]] | list[Any]) -> Path:
    keys = ("id", "question", "path", "answer", "kind")
    path.write_text(
        "".join(
            json.dumps(dict(zip(keys, r, strict=True)), ensure_ascii=False) + "\n" for r in rows
        )
    )
    return path


def test_rule_files_are_checked_and_labelled(tmp_path: Path) -> None:
    from ingestd.daemon.evaluation.rulesets import LabeledRules, rule_sets

    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - match: ['*']\n    chunker: token\n    params: {max_tokens: -1}\n")
    with pytest.raises(ConfigError) as err:
        rule_sets([bad], load_config(None), None)
    assert str(err.value) == f"{bad}: rules[0].params: max_tokens must be > 0"
    (tmp_path / "none.yaml").write_text("sources: []\n")
    with pytest.raises(ConfigError, match="rules:"):
        rule_sets([tmp_path / "none.yaml"], load_config(None), None)
    # a config file is a rules file too; two files of one name are told apart by path
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    for d in ("x", "y"):
        (tmp_path / d / "r.yaml").write_text("state_dir: s\n" + TINY)
    sets = rule_sets([tmp_path / "x/r.yaml", tmp_path / "y/r.yaml"], load_config(None), None)
    assert [s.label for s in sets] == [str(tmp_path / "x/r.yaml"), str(tmp_path / "y/r.yaml")]
    assert sets[0].rules[0].chunker == "token"
    assert LabeledRules.from_dict(sets[0].as_dict()) == sets[0]
    (default,) = rule_sets([], load_config(None), None)
    assert default.label == "default rules" and default.rules == load_config(None).rules


def test_rule_and_config_files_that_cannot_be_read_name_the_file_and_the_line(
    tmp_path: Path,
) -> None:
    from ingestd.daemon.evaluation.rulesets import load_rule_file

    broken = tmp_path / "broken.yaml"
    broken.write_text("rules: [\n")
    for load, what in ((load_config, "config file"), (load_rule_file, "rules file")):
        with pytest.raises(ConfigError) as err:
            load(broken)
        assert str(err.value).startswith(f"{broken}:2:1: invalid YAML: expected the node")
        with pytest.raises(ConfigError) as err:
            load(tmp_path / "none.yaml")
        assert (
            str(err.value)
            == f"{tmp_path / 'none.yaml'}: cannot read the {what}: No such file or directory"
        )


def test_progress_log_writes_a_line_per_phase_and_then_one_every_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import time

    from ingestd.daemon.cli.eval_client import ProgressLog
    from ingestd.daemon.evaluation.evaluate import EvalProgress
    from ingestd.daemon.sync.types import SyncProgress

    clock = [0.0]
    log = ProgressLog(every=30, now=lambda: clock[0])
    # a quarter of the bytes in 10 s: 30 s left (the ETA reads the real clock)
    sync = SyncProgress(
        "eval:tiny",
        docs_done=1,
        docs_total=4,
        bytes_done=10,
        bytes_total=40,
        started=time.monotonic() - 10,
    )
    indexing = EvalProgress("0123abcd", "tiny", 0, 2, sync=sync)
    caplog.set_level("INFO", logger="ingestd.daemon.cli.eval_client")
    log(EvalProgress("0123abcd", "tiny", 0, 2))  # nothing to show before the first slice
    for t in (1.0, 2.0, 20.0, 31.5, 40.0):  # one line, then one 30 s later
        clock[0] = t
        log(indexing)
    clock[0] = 41.0
    log(EvalProgress("0123abcd", "tiny", 0, 2, phase="searching", searched=0, searches=14))
    log(EvalProgress("0123abcd", "tiny", 0, 2, phase="searching", searched=5, searches=14))
    assert [r.getMessage() for r in caplog.records] == [
        "eval 1/2: indexing with tiny: 1/4 documents, 0 chunks embedded, 30s left",
        "eval 1/2: indexing with tiny: 1/4 documents, 0 chunks embedded, 30s left",
        "eval 1/2: searching with tiny: 0/14 searches",
    ]


def test_report_rows_and_differences_by_hand() -> None:
    from ingestd.daemon.evaluation.report import format_table, summarise

    qs = [Question(f"q{i}", "?", "a.md", "x", "fact", 0, 1) for i in range(4)]
    raw = {
        "corpus": "/c",
        "modes": ["dense", "hybrid"],
        "questions_embedded": 4,
        "rule_sets": [
            {
                "label": "default rules",
                "documents": 1,
                "chunks": 3,
                "embedded": 3,
                "reused": 0,
                "failed": {},
                "unreadable": [],
                "unindexed": [],
                "split": ["q3"],
                "ranks": {
                    "dense": [[1, 2], [2, None], [None, None], [1, None]],
                    "hybrid": [[1, 1], [1, 1], [3, 3], [1, None]],
                },
            }
        ],
    }
    report = summarise(raw, qs, resamples=1000, seed=0, question_set="q.jsonl")
    dense, hybrid = report["rows"]
    assert dense["path"] == {"R@1": 50.0, "R@5": 75.0, "R@10": 75.0, "MRR@10": 62.5}
    assert dense["span"] == {"R@1": 0.0, "R@5": 25.0, "R@10": 25.0, "MRR@10": 12.5}
    assert hybrid["span"] == {"R@1": 50.0, "R@5": 75.0, "R@10": 75.0, "MRR@10": 58.33}
    assert dense["vs_first"] is None
    d = hybrid["vs_first"]["span"]["R@5"]
    assert d["diff"] == 50.0 and d["low"] <= 0.0 < d["diff"] <= d["high"] <= 100.0
    assert hybrid["ranks"][2] == {"id": "q2", "path_rank": 3, "span_rank": 3}
    text = format_table(report).splitlines()
    assert text[0] == "4 questions (q.jsonl) over /c; one question is 25.00 points"
    assert text[2] == (
        "default rules: 1 document, 3 chunks (3 embedded, 0 from the cache); "
        "1 answer split across chunks"
    )
    header = text.index(next(ln for ln in text if ln.startswith("rules ")))
    assert [ln.split()[2:] for ln in text[header + 1 : header + 3]] == [
        ["dense", "50.0", "75.0", "75.0", "62.5", "0.0", "25.0", "25.0", "12.5"],
        ["hybrid", "75.0", "100.0", "100.0", "83.3", "50.0", "75.0", "75.0", "58.3"],
    ]
    assert any(ln.split()[:3] == ["span", "+50.0", "[0.0,"] for ln in text)


# -- end to end, real model -------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    copy_tree(root, RST, CORPORA / "rst-docs")
    copy_tree(root, MD, MD_DOCS)
    shutil.copyfile(REPO / "tests/data/code_sample.py", root / "code_sample.py")
    return root


@pytest.fixture(scope="module")
def qa(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_questions(tmp_path_factory.mktemp("qa") / "questions.jsonl", QUESTIONS)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "tiny.yaml"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="module")
def first_run(
    corpus: Path, qa: Path, tiny: Path, real_model: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path, list[Question]]:
    """A local run of the default and the tiny rules, all modes, into a new state dir."""
    from ingestd.daemon.evaluation.rulesets import rule_sets
    from ingestd.daemon.evaluation.runs import run_local

    state = tmp_path_factory.mktemp("state")
    cfg = load_config(None)
    qs = load_questions(qa, corpus)
    sets = [*rule_sets([], cfg, None), *rule_sets([tiny], cfg, None)]
    scratch_before = _scratch_dirs()
    plan = EvalPlan(corpus, qs, sets, MODES)
    raw = run_local(cfg, state, plan, embed_model=CountingEmbedder(real_model))
    assert _scratch_dirs() == scratch_before  # its scratch state dir is gone
    return raw, state, qs


@pytest.fixture(scope="module", autouse=True)
def private_tempdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The local runs' scratch state dirs go to a folder of this module's own: in the
    parallel suite, another worker's runs would show in a listing of the shared one."""
    previous = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tempdir"))
    yield Path(tempfile.tempdir)
    tempfile.tempdir = previous


def _scratch_dirs() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("ingestd-eval-")}


def _ranks(row: dict[str, Any]) -> dict[str, tuple[int | None, int | None]]:
    return {r["id"]: (r["path_rank"], r["span_rank"]) for r in row["ranks"]}


@pytest.mark.slow
def test_table_is_right_for_hand_checked_cases(
    first_run: tuple[dict[str, Any], Path, list[Question]],
) -> None:
    from ingestd.daemon.evaluation.report import format_table, summarise

    raw, _, qs = first_run
    report = summarise(raw, qs, resamples=5000, seed=0, question_set="questions.jsonl")
    assert [(r["rules"], r["mode"]) for r in report["rows"]] == [
        (rules, mode) for rules in ("default rules", "tiny") for mode in MODES
    ]
    default, tiny = report["rule_sets"]
    assert default["documents"] == tiny["documents"] == 6  # code_sample.py is not included
    assert default["unindexed"] == tiny["unindexed"] == ["e7"]
    assert default["split"] == [] and tiny["split"] == ["e4", "e5", "e6"]
    assert tiny["chunks"] > default["chunks"]
    for row in report["rows"]:
        ranks = _ranks(row)
        assert ranks["e1"] == ranks["e3"] == (1, 1), (row["rules"], row["mode"])
        assert [ranks[q][0] for q in ("e2", "e4", "e5", "e6")] == [1, 1, 1, 1]
        assert ranks["e7"] == (None, None)
        assert row["path"]["R@1"] == pytest.approx(600 / 7, abs=0.01)
        if row["rules"] == "tiny":
            assert {ranks[q][1] for q in ("e4", "e5", "e6")} == {None}
        # each cell is the metric of the listed ranks (scoring is checked by hand above)
        for level in ("path", "span"):
            want = metrics([r[f"{level}_rank"] for r in row["ranks"]])
            assert row[level] == {k: round(v, 2) for k, v in want.items()}
    first = report["rows"][0]
    assert first["vs_first"] is None
    assert first["path"]["R@10"] == pytest.approx(600 / 7, abs=0.01)  # all but e7
    assert first["span"]["R@10"] == pytest.approx(600 / 7, abs=0.01)
    tiny_hybrid = report["rows"][3]
    assert tiny_hybrid["span"]["R@10"] == pytest.approx(300 / 7, abs=0.01)  # e1-e3
    iv = tiny_hybrid["vs_first"]["span"]["R@10"]
    assert iv["diff"] == pytest.approx(-300 / 7, abs=0.01)
    assert -100 <= iv["low"] < iv["diff"] < iv["high"] < 0  # three of seven lost: not noise
    text = format_table(report)
    assert "5,000 resamples, seed 0" in text and "one question is 14.29 points" in text
    assert "tiny: 6 documents" in text and "3 answers split across chunks" in text


@pytest.mark.slow
def test_ranks_are_those_of_ingestd_search_over_the_same_tree(
    first_run: tuple[dict[str, Any], Path, list[Question]],
    corpus: Path,
    real_model: Any,
    tmp_path: Path,
) -> None:
    """The eval asks what `ingestd search` would answer for a resync of the tree."""
    from ingestd.daemon.commands.query.search import search as search_cmd
    from ingestd.store.search.pages import page_scores

    raw, state, qs = first_run
    embed = CountingEmbedder(real_model)
    shutil.copyfile(state / "embeddings.db", tmp_path / "embeddings.db")
    engine = make_engine(corpus, tmp_path, embed)
    try:
        engine.sync(next(iter(engine.context.sources)))
        assert not embed.texts  # the eval filled the cache: the same chunks
        for mode in MODES:
            want = raw["rule_sets"][0]["ranks"][mode]
            pages = raw["rule_sets"][0]["pages"][mode]
            for q, (path_rank, span_rank), listed in zip(qs, want, pages, strict=True):
                hits = search_cmd(engine, q.question, k=50, mode=mode)
                top = hits[:10]
                got = rank_hits(q, [(h["path"], h["start_char"], h["end_char"]) for h in top])
                assert (got.path, got.span) == (path_rank, span_rank), (mode, q.id)
                by_page = page_scores((h["path"], h["score"]) for h in hits)
                assert listed == pages_of(p for p, _ in by_page), (mode, q.id)
    finally:
        engine.close()


@pytest.mark.slow
def test_a_page_level_set_and_a_run_file_are_scored_side_by_side(
    first_run: tuple[dict[str, Any], Path, list[Question]], corpus: Path, tmp_path: Path
) -> None:
    """`ingestd eval QRELS --corpus DIR --run FILE`: judgements only, another system's run.

    The questions' texts are e1-e3's, so the state dir's cache holds their vectors and
    nothing is embedded; ingestd's own ranking saved as a run scores exactly as its row.
    """
    from click.testing import CliRunner

    from ingestd.daemon.cli.main import cli

    _, state0, _ = first_run
    state = tmp_path / "state"
    state.mkdir()
    shutil.copyfile(state0 / "embeddings.db", state / "embeddings.db")
    pages = tmp_path / "pages.jsonl"
    judged = [
        {"usage/extensions/githubpages.rst": 3, "usage/extensions/": 1},
        {"usage/extensions/todo.rst": 3, "usage/extensions/ifconfig.rst": 1},
        {"extdev/testing.rst": 3, "docs/concepts/signals/baggage.md": 2},
    ]
    pages.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "question": q[1], "qrels": qrels}) + "\n"
            for i, (q, qrels) in enumerate(zip(QUESTIONS, judged, strict=False), 1)
        )
    )
    other = tmp_path / "other.run"  # a perfect system, and one that misses p3
    other.write_text(
        "p1 Q0 usage/extensions/githubpages.rst 1 2.0 x\n"
        "p1 Q0 usage/extensions/todo.rst 2 1.0 x\n"
        "p2 Q0 usage/extensions/todo.rst 1 2.0 x\n"
        "p2 Q0 usage/extensions/ifconfig.rst 2 1.0 x\n"
    )
    ours = tmp_path / "ours.run"
    base = ["eval", str(pages), "--corpus", str(corpus), "--state-dir", str(state)]
    res = CliRunner().invoke(cli, [*base, "--mode", "hybrid", "--save-run", str(ours), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["questions"] == 3 and report["answered"] == 0
    assert report["questions_embedded"] == 0
    (row,) = report["rows"]
    assert row["pages"]["Hit@5"] == 100.0 and 0 < row["pages"]["nDCG@5"] <= 100.0
    res = CliRunner().invoke(
        cli, [*base, "--mode", "hybrid", "--run", str(ours), "--run", str(other), "--json"]
    )
    assert res.exit_code == 0, res.output
    again = json.loads(res.stdout)
    saved, perfect = again["runs"]
    assert saved["run"] == "ours" and saved["pages"] == row["pages"]
    assert all(d["diff"] == 0.0 for d in saved["vs_first"].values())
    assert perfect["missing"] == ["p3"]
    # p1: gains 3, 1 (the folder, through todo.rst): DCG 3 + 1/log2(3); IDCG the same
    assert perfect["pages"]["Hit@5"] == pytest.approx(200 / 3, abs=0.01)
    text = CliRunner().invoke(cli, [*base, "--mode", "hybrid", "--run", str(other)])
    assert text.exit_code == 0 and "run other" in text.output and "page level" in text.output
    # judged at page level only: no path or span table of zeros
    assert "path level" not in text.output and "0 with a verbatim answer" in text.output


@pytest.mark.slow
def test_a_second_run_embeds_nothing(
    first_run: tuple[dict[str, Any], Path, list[Question]],
    corpus: Path,
    tiny: Path,
    real_model: Any,
) -> None:
    from ingestd.daemon.evaluation.rulesets import rule_sets
    from ingestd.daemon.evaluation.runs import run_local

    raw, state, qs = first_run
    cfg = load_config(None)
    embed = CountingEmbedder(real_model)
    plan = EvalPlan(corpus, qs, [*rule_sets([], cfg, None), *rule_sets([tiny], cfg, None)], MODES)
    again = run_local(cfg, state, plan, embed_model=embed)
    assert embed.texts == []
    assert again["questions_embedded"] == 0
    assert [rs["embedded"] for rs in again["rule_sets"]] == [0, 0]
    assert [rs["ranks"] for rs in again["rule_sets"]] == [rs["ranks"] for rs in raw["rule_sets"]]


@pytest.mark.slow
def test_interrupted_local_run_leaves_no_scratch_state(
    first_run: tuple[dict[str, Any], Path, list[Question]], corpus: Path, real_model: Any
) -> None:
    from ingestd.daemon.evaluation.rulesets import rule_sets
    from ingestd.daemon.evaluation.runs import run_local

    _, state, qs = first_run
    cfg = load_config(None)
    before = _scratch_dirs()

    def ctrl_c(p: Any) -> None:
        if p.phase == "searching":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        plan = EvalPlan(corpus, qs, rule_sets([], cfg, None), ["hybrid"])
        run_local(cfg, state, plan, progress=ctrl_c, embed_model=CountingEmbedder(real_model))
    assert _scratch_dirs() == before


@pytest.mark.slow
def test_sigterm_ends_a_local_run_with_143_and_leaves_no_scratch_state(
    first_run: tuple[dict[str, Any], Path, list[Question]],
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from contextlib import contextmanager

    from ingestd.daemon.cli import eval_client as eval_cli
    from ingestd.daemon.evaluation.rulesets import rule_sets

    _, state, qs = first_run
    cfg = load_config(None)
    before = _scratch_dirs()
    seen: list[str] = []

    @contextmanager
    def sigterm_when_searching(quiet: bool) -> Iterator[Any]:
        def show(p: Any) -> None:
            if p.phase == "searching" and not seen:
                seen.append(p.phase)
                assert _scratch_dirs() - before  # the scratch state exists now
                os.kill(os.getpid(), signal.SIGTERM)

        yield show

    monkeypatch.setattr(eval_cli, "progress_display", sigterm_when_searching)
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exc:
        eval_cli.run(cfg, state, EvalPlan(corpus, qs, rule_sets([], cfg, None), ["sparse"]))
    assert exc.value.code == 143 and seen == ["searching"]
    assert _scratch_dirs() == before
    assert signal.getsignal(signal.SIGTERM) == previous


# -- through a daemon ---------------------------------------------------------------------------


class Switch(CountingEmbedder):
    """The real model, counting; it can hold a call until released, or fail."""

    def __init__(self, fn: Any) -> None:
        super().__init__(fn)
        import threading

        self.hold = threading.Event()
        self.release = threading.Event()
        self.held = threading.Event()
        self.fail = False

    def __call__(self, texts: Any) -> Any:
        if self.fail:
            raise RuntimeError("the model broke")
        if self.hold.is_set():
            self.held.set()
            self.release.wait(60)
        return super().__call__(texts)


@pytest.fixture
def harness(
    first_run: tuple[dict[str, Any], Path, list[Question]],
    corpus: Path,
    real_model: Any,
    tmp_path: Path,
) -> Iterator[Any]:
    """A daemon in this process watching a copy of the tree, with the cache of the first run."""
    from tests.daemon.harness import Harness

    _, state0, _ = first_run
    root = tmp_path / "docs"
    shutil.copytree(corpus, root)
    state = tmp_path / "state"
    state.mkdir()
    shutil.copyfile(state0 / "embeddings.db", state / "embeddings.db")
    with Harness(root, state, Switch(real_model)) as h:
        yield h


def _collections(h: Any) -> list[str]:
    return h.call(lambda e: sorted(e.resources.store.collections()))


@pytest.mark.slow
def test_ctrl_c_through_the_daemon_cancels_and_drops_the_collections(
    harness: Any, corpus: Path, qa: Path, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import contextmanager

    from ingestd.daemon.cli import eval_client as eval_cli
    from ingestd.daemon.evaluation.collections import LEDGER
    from ingestd.daemon.evaluation.rulesets import rule_sets
    from ingestd.daemon.wire.protocol import request

    h = harness
    before = _collections(h)
    cfg = load_config(None)
    qs = load_questions(qa, corpus)
    small = tiny.with_name("small.yaml")  # new chunk texts: the model is called
    small.write_text(TINY.replace("32", "24"))
    seen: list[Any] = []

    @contextmanager
    def ctrl_c_when_held(quiet: bool) -> Iterator[Any]:
        def show(p: Any) -> None:
            seen.append(p)
            if h.embed.held.is_set():  # the daemon is embedding for the eval: cancel now
                request(h.state, "eval-cancel", {"run": p.run})
                h.embed.release.set()
                raise KeyboardInterrupt

        yield show

    monkeypatch.setattr(eval_cli, "progress_display", ctrl_c_when_held)
    h.embed.hold.set()
    with pytest.raises(KeyboardInterrupt):
        eval_cli.run(cfg, h.state, EvalPlan(corpus, qs, rule_sets([small], cfg, None), ["hybrid"]))
    assert seen and seen[-1].phase == "indexing" and seen[-1].rule_set == "small"
    h.embed.hold.clear()
    run = seen[-1].run
    wait_for(lambda: request(h.state, "eval-progress", {"run": run}) is None, 30, "the run to end")
    assert _collections(h) == before
    assert not (h.state / LEDGER).read_text().strip()
    # the daemon goes on: its own source still answers
    hits = h.call(lambda e: e.resources.store.point_count("ingestd"))
    assert hits > 0


@pytest.mark.slow
def test_a_failing_run_in_the_daemon_drops_its_collections_and_those_left_by_a_killed_one(
    harness: Any, corpus: Path, qa: Path, tiny: Path
) -> None:
    from ingestd.daemon.cli import eval_client as eval_cli
    from ingestd.daemon.evaluation.collections import LEDGER
    from ingestd.daemon.evaluation.rulesets import rule_sets
    from ingestd.daemon.wire.errors import DaemonError

    h = harness
    before = _collections(h)
    # a run killed with the daemon left a collection behind, listed in the ledger
    h.call(lambda e: e.resources.store.ensure_collection("eval-0123abcd-0", 384))
    (h.state / LEDGER).write_text("eval-0123abcd-0\ningestd\n")
    assert "eval-0123abcd-0__v1" in _collections(h)
    cfg = load_config(None)
    qs = load_questions(qa, corpus)
    small = tiny.with_name("smaller.yaml")
    small.write_text(TINY.replace("32", "20"))
    h.embed.fail = True
    try:
        with pytest.raises(DaemonError, match="no document .* could be indexed .*the model broke"):
            eval_cli.run(
                cfg, h.state, EvalPlan(corpus, qs, rule_sets([small], cfg, None), ["dense"])
            )
    finally:
        h.embed.fail = False
    assert _collections(h) == before  # the leftover too; never the source's collection
    assert not (h.state / LEDGER).read_text().strip()


@pytest.mark.slow
def test_eval_through_a_running_daemon_matches_the_local_run(
    first_run: tuple[dict[str, Any], Path, list[Question]],
    corpus: Path,
    qa: Path,
    tiny: Path,
    tmp_path: Path,
) -> None:
    """`ingestd eval` with `ingestd run` holding the state dir: same table, nothing
    embedded (the cache is the state dir's), no eval collection or manifest row left."""
    raw, state0, _ = first_run
    root = tmp_path / "docs"
    shutil.copytree(corpus, root)
    state = tmp_path / "state"
    state.mkdir()
    shutil.copyfile(state0 / "embeddings.db", state / "embeddings.db")
    log = (tmp_path / "daemon.log").open("w")
    proc = subprocess.Popen(
        [*ingestd_cmd(), "run", "--state-dir", str(state), str(root)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "INGESTD_STATE_DIR": ""},
    )
    try:

        def watching() -> bool:
            p = run_cli("status", "--state-dir", str(state), "--json", timeout=60)
            return (
                p.returncode == 0
                and (json.loads(p.stdout).get("daemon") or {}).get("phase") == "watching"
            )

        wait_for(watching, 240, "the daemon's first reconcile", interval=0.5)
        points = json.loads(run_cli("status", "--state-dir", str(state), "--json").stdout)
        args = ["eval", str(qa), "--corpus", str(corpus), "--state-dir", str(state), "--json"]
        proc_eval = run_cli(*args, "--rules", str(tiny), "--mode", "hybrid", "--mode", "sparse",
                            timeout=300)  # fmt: skip
        assert proc_eval.returncode == 0, proc_eval.stderr
        report = json.loads(proc_eval.stdout)
        assert report["questions_embedded"] == 0
        assert [rs["embedded"] for rs in report["rule_sets"]] == [0]
        want = raw["rule_sets"][1]["ranks"]
        for row in report["rows"]:
            got = [[r["path_rank"], r["span_rank"]] for r in row["ranks"]]
            assert got == want[row["mode"]], row["mode"]
        after = json.loads(run_cli("status", "--state-dir", str(state), "--json").stdout)
        assert [(s["source"], s["documents"], s["chunks"]) for s in after["sources"]] == [
            (s["source"], s["documents"], s["chunks"]) for s in points["sources"]
        ]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    from tests.helpers import open_state_store

    store = open_state_store(state)
    try:
        names, aliases = store.collections(), list(store.aliases())
    finally:
        store.close()
    assert names == ["ingestd__v1"] and aliases == ["ingestd"]
    assert "Traceback" not in (tmp_path / "daemon.log").read_text()


def test_questions_get_the_query_prompt_and_chunks_the_document_prompt(
    corpus: Path, qa: Path, tmp_path: Path
) -> None:
    from ingestd.daemon.evaluation.rulesets import rule_sets
    from ingestd.daemon.evaluation.runs import run_local

    prompts = {"query_prompt": "query: ", "document_prompt": "passage: "}
    cfg = load_config(None, overrides={"embedding": prompts})
    qs = load_questions(qa, corpus)
    embed = CountingEmbedder(fake_vectors)
    raw = run_local(
        cfg,
        tmp_path / "state",
        EvalPlan(corpus, qs, rule_sets([], cfg, None), ("dense",)),
        embed_model=embed,
    )
    asked = [t for t in embed.texts if t.startswith("query: ")]
    assert asked == ["query: " + q.question for q in qs]
    assert raw["questions_embedded"] == len(qs)
    rest = [t for t in embed.texts if not t.startswith("query: ")]
    assert rest and all(t.startswith("passage: ") for t in rest)
