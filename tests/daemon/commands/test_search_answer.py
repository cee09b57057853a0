"""What a search answers besides its hits: checked arguments, the mode, notes, indexing.

* a ``path`` filter outside every source's root is an error naming it (it used to
  answer "no results" with ``"mode": "default"``);
* a query longer than the model's window is cut, with a note;
* the mode actually used is in every answer, with or without hits;
* while a sync writes documents (a first reconcile), the answer says how many are left.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.daemon.commands.query.search import answer, search
from ingestd.daemon.wire.errors import DaemonError
from tests.helpers import fake_vectors, make_engine


@pytest.fixture
def engine(tree: Path, tmp_path: Path) -> Iterator[Any]:
    eng = make_engine(tree, tmp_path / "state", fake_vectors)
    try:
        for name in eng.context.sources:
            eng.sync(name)
        yield eng
    finally:
        eng.close()


@pytest.mark.parametrize("bad", ["../..", "/etc", "../../etc/passwd", "docs/../../x"])
def test_a_path_filter_outside_every_root_is_an_error_naming_it(engine: Any, bad: str) -> None:
    for mode in ("sparse", "hybrid"):
        with pytest.raises(DaemonError) as err:
            answer(engine, "collector", path=bad, mode=mode)
        assert err.value.exit_code == 2
        assert f"path filter {bad} " in str(err.value) and "root" in str(err.value)


def test_a_path_filter_by_absolute_path_under_the_root_is_the_relative_one(
    engine: Any, tree: Path
) -> None:
    rel = search(engine, "collector", k=3, path="docs/collector", mode="sparse")
    absolute = search(engine, "collector", k=3, path=str(tree / "docs/collector"), mode="sparse")
    assert rel and [h["id"] for h in absolute] == [h["id"] for h in rel]


def test_the_cli_names_a_bad_path_filter(engine: Any, tmp_path: Path) -> None:
    engine.close()
    res = CliRunner().invoke(
        cli, ["search", "--state-dir", str(tmp_path / "state"), "--path", "/etc", "x"]
    )
    assert res.exit_code == 2 and "path filter /etc is outside every source's root" in res.output


def test_a_query_over_the_model_window_is_cut_with_a_note(engine: Any) -> None:
    long = "how do I configure the collector pipeline " * 2500  # about 100 KB
    got = answer(engine, long, k=3, mode="sparse")
    assert len(got["query"]) < 2000 and long.startswith(got["query"])
    assert any("cut to its first 254 word pieces" in n for n in got["notes"]), got["notes"]
    assert got["hits"]  # still answered, from the words the model reads
    short = answer(engine, "collector pipeline", k=3, mode="sparse")
    assert short["query"] == "collector pipeline" and not short["notes"]


@pytest.mark.parametrize("mode", ["sparse", "hybrid", "dense"])
def test_the_mode_used_is_in_every_answer(engine: Any, mode: str) -> None:
    got = answer(engine, "zzzqqq", k=3, mode=mode, path="docs/concepts")
    assert got["mode"] == mode
    if mode == "sparse":
        assert got["hits"] == []  # nothing matches, and the answer still says how it searched
    default = answer(engine, "collector", k=1)
    assert default["mode"] == "hybrid"  # search.mode, never "default"


def test_search_during_a_sync_says_how_many_documents_are_left(tree: Path, tmp_path: Path) -> None:
    eng = make_engine(tree, tmp_path / "state", fake_vectors)
    seen: list[dict[str, Any] | None] = []
    try:
        # the daemon serves searches at the checkpoints of a long sync; so does this
        eng.checkpoints.on_checkpoint = lambda _serve: seen.append(
            answer(eng, "collector", k=1, mode="sparse")["indexing"]
        )
        eng.sync(next(iter(eng.context.sources)))
        eng.checkpoints.on_checkpoint = None
        assert answer(eng, "collector", k=1, mode="sparse")["indexing"] is None
    finally:
        eng.close()
    during = [s for s in seen if s]
    assert during, seen
    total = len(list(tree.rglob("*.md")))
    assert all(0 < s["documents"] <= total for s in during)
    assert during[0]["documents"] >= during[-1]["documents"]


def test_cli_json_of_a_budgeted_search_is_the_passages(engine: Any, tmp_path: Path) -> None:
    engine.close()
    state = str(tmp_path / "state")
    args = ["search", "--state-dir", state, "--mode", "sparse", "--json"]
    res = CliRunner().invoke(cli, [*args, "--budget-tokens", "500", "collector pipeline"])
    assert res.exit_code == 0, res.output
    passages = json.loads(res.stdout)
    assert passages and sum(p["n_tokens"] for p in passages) <= 500
    assert {"ids", "text", "start_line", "end_line", "n_tokens"} <= set(passages[0])
    text = CliRunner().invoke(cli, [*args[:-1], "--budget-tokens", "500", "collector pipeline"])
    assert text.exit_code == 0 and "tokens" in text.output
