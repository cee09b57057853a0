"""Search filters are exact on a real corpus: ``--path X -k 1`` finds X whenever X has points.

A sample of real rst-docs files (nested folders) is indexed; for randomly chosen files
and every folder, a search limited to it returns, at ``k = 1``, a chunk of it, in each
mode. The filter is a Qdrant condition applied before ranking; an over-fetch filtered
afterwards fails this at ``k = 1`` for any file that ranks low for the query.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.daemon.commands.query.search import search as search_cmd
from tests.helpers import CORPORA, copy_tree, fake_vectors, make_engine, store_snapshot

RST_DOCS = CORPORA / "rst-docs"


def _sample(n: int, seed: int) -> list[str]:
    files = sorted(
        str(p.relative_to(RST_DOCS)) for p in (RST_DOCS / "usage").rglob("*.rst") if p.is_file()
    )
    return sorted(random.Random(seed).sample(files, n))


def _targets(points: dict[str, dict[str, Any]], seed: int) -> list[str]:
    """Random files and every folder that hold points."""
    paths = sorted({p["path"] for p in points.values()})
    folders = sorted({str(Path(p).parent) for p in paths} - {"."})
    return sorted(random.Random(seed).sample(paths, 8)) + folders


def _holds(target: str, path: str) -> bool:
    return path == target or path.startswith(target + "/")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("filters")
    root = copy_tree(tmp / "docs", _sample(14, seed=3), base=RST_DOCS)
    state = tmp / "state"
    eng = make_engine(root, state, fake_vectors)
    try:
        eng.sync(next(iter(eng.context.sources)))
    finally:
        eng.close()
    return root, state


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_path_filter_finds_every_file_and_folder_at_k_1(
    indexed: tuple[Path, Path], mode: str
) -> None:
    root, state = indexed
    points = store_snapshot(state, sparse=False)
    eng = make_engine(root, state, fake_vectors)
    try:
        for target in _targets(points, seed=11):
            # sparse ranks only points that share a query term: ask with a word of X
            word = next(
                w
                for p in sorted(points.values(), key=lambda p: (p["path"], p["ordinal"]))
                if _holds(target, p["path"]) and not p.get("is_parent")
                for w in p["text"].split()
                if w.isalpha() and len(w) > 4
            )
            query = f"how do I configure the builder {word}"
            hits = search_cmd(eng, query, k=1, path=target, mode=mode)
            assert len(hits) == 1, (target, mode)
            assert _holds(target, hits[0]["path"]), (target, hits[0]["path"])
            # the same filter with a trailing slash and a leading ./ means the same
            again = search_cmd(eng, query, k=1, path=f"./{target}/", mode=mode)
            assert [h["id"] for h in again] == [hits[0]["id"]]
    finally:
        eng.close()


def test_path_filter_of_the_cli_at_k_1_with_the_real_model(tmp_path: Path) -> None:
    """End to end: ``ingestd search --path FILE -k 1`` with the real model finds FILE."""
    files = ["usage/markdown.rst", "usage/installation.rst", "usage/extensions/duration.rst"]
    root = copy_tree(tmp_path / "docs", files, base=RST_DOCS)
    state = tmp_path / "state"
    runner = CliRunner()
    args = ["--state-dir", str(state)]
    res = runner.invoke(cli, ["resync", *args, str(root)])
    assert res.exit_code == 0, res.output
    for target in files:
        res = runner.invoke(cli, ["search", *args, "--json", "--path", target, "-k", "1", "theme"])
        assert res.exit_code == 0, res.output
        hits = json.loads(res.stdout)
        assert [h["path"] for h in hits] == [target]


@pytest.mark.parametrize("path", ["usage/no-such-folder", "usage/quickstart.rst.bak"])
def test_a_path_under_which_nothing_is_indexed_says_so(
    indexed: tuple[Path, Path], path: str
) -> None:
    """Not a bare "no results" (exit 0), which reads as "the query found nothing"."""
    from ingestd.daemon.commands.query.search import answer

    root, state = indexed
    eng = make_engine(root, state, fake_vectors)
    try:
        got = answer(eng, "configuration", path=path, mode="sparse")
        assert got["hits"] == []
        assert any(n.startswith(f"nothing matches path {path}: no document") for n in got["notes"])
        # a filter that matches documents adds no such note, hits or not
        got = answer(eng, "zzzz-no-such-word", path="usage", mode="sparse")
        assert not [n for n in got["notes"] if n.startswith("nothing matches")]
    finally:
        eng.close()
