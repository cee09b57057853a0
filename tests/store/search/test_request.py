"""One search request record: the wire it travels as, and a new filter in one place.

A filter is a field of :class:`~ingestd.store.search.query.Filters` and, when its
payload key or match differs from its name, one entry of its translator
(:meth:`Filters.condition`); the request record, its wire form and every engine's
filter follow from them. The new filter here exists in this test only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.store.search.conditions import Condition, Match
from ingestd.store.search.query import HIDDEN_KEYS, PATH_KEY, Filters, path_prefixes
from ingestd.store.search.request import SearchRequest
from ingestd.store.search.sparse import document_vector, query_vector
from ingestd.store.vectors.base import Point
from tests.helpers import open_store

DIM = 8


@dataclass(frozen=True, slots=True)
class LanguageFilters(Filters):
    """The record plus one filter: ``language``, matched on the payload key ``lang``."""

    language: str | None = None

    def condition(self, name: str, value: Any, *, legacy: bool = False) -> Condition | None:
        if name == "language":  # the one translator entry
            return Match("lang", value)
        return Filters.condition(self, name, value, legacy=legacy)


def test_the_wire_carries_the_arguments_it_always_carried() -> None:
    assert SearchRequest("q").wire() == {
        "query": "q", "k": 5, "source": None, "path": None, "expand": False, "mode": None,
        "ranks": False,
    }  # fmt: skip
    full = SearchRequest(
        "q", 3, "sparse", Filters(source="s", path="docs", version="v1"), expand=True,
        ranks=True, budget_tokens=512, per_page=2,
    )  # fmt: skip
    assert full.wire() == {
        "query": "q", "k": 3, "source": "s", "path": "docs", "version": "v1", "expand": True,
        "mode": "sparse", "ranks": True, "budget_tokens": 512, "per_page": 2,
    }  # fmt: skip
    assert SearchRequest.from_wire(full.wire()) == full
    assert SearchRequest.from_wire({"query": "q"}) == SearchRequest("q")


def test_an_unknown_argument_is_named() -> None:
    with pytest.raises(TypeError, match="unknown search argument.*: colour"):
        SearchRequest.from_wire({"query": "q", "colour": "red"})


def test_a_mode_is_checked_against_the_modes() -> None:
    assert SearchRequest("q").checked_mode("dense") == "dense"
    assert SearchRequest("q", mode="sparse").checked_mode("dense") == "sparse"
    with pytest.raises(ValueError, match="unknown search mode 'fuzzy'"):
        SearchRequest("q", mode="fuzzy").checked_mode("hybrid")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Filters)])
def test_every_filter_of_the_record_becomes_a_condition(name: str) -> None:
    """A filter field the translator forgot would limit nothing: each one limits."""
    got = Filters(**{name: "docs"}).conditions()
    assert len(got.must) == 1 and got.unset == HIDDEN_KEYS


def test_a_new_filter_travels_the_wire_without_a_change_there() -> None:
    request = SearchRequest("q", filters=LanguageFilters(source="s", language="rust"))
    assert request.wire()["language"] == "rust"
    assert SearchRequest.from_wire(request.wire(), filters=LanguageFilters) == request
    assert LanguageFilters(language="rust").conditions().must == (Match("lang", "rust"),)


@pytest.fixture
def store(tmp_path: Path, qdrant_engine: str) -> Iterator[Any]:
    s = open_store(tmp_path / "q", qdrant_engine)
    s.ensure_collection("c", DIM)
    yield s
    s.close()


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_a_new_filter_limits_the_search_in_the_store_before_ranking(store: Any, mode: str) -> None:
    """12 points: 10 ``python`` ones close to the query, 2 ``rust`` far: ``k`` 1 finds rust."""
    rng = np.random.default_rng(3)
    points = []
    for i in range(12):
        lang = "python" if i < 10 else "rust"
        vec = np.asarray([1.0, *rng.normal(0, 0.1 if lang == "python" else 3, DIM - 1)])
        text = "exporter pipeline config" if lang == "python" else "exporter"
        path = f"src/f{i}.txt"
        payload = {"source": "s", "path": path, PATH_KEY: path_prefixes(path), "lang": lang}
        payload["text"] = text
        pid = f"00000000-0000-0000-0000-{i:012d}"
        points.append(Point(pid, list(vec / np.linalg.norm(vec)), payload, document_vector(text)))
    store.upsert("c", points)
    request = SearchRequest.from_wire(
        {"query": "exporter pipeline", "k": 1, "mode": mode, "language": "rust"},
        filters=LanguageFilters,
    )
    q = [1.0] + [0.0] * (DIM - 1)
    hits = store.search(
        "c", dense=q, sparse=query_vector(request.query), limit=request.k,
        filters=request.filters, mode=request.checked_mode("hybrid"),
    )  # fmt: skip
    assert [h.payload["lang"] for h in hits] == ["rust"]
    everything = store.search(
        "c", dense=q, sparse=query_vector(request.query), limit=12,
        filters=LanguageFilters(language="rust", source="s"), mode=mode,  # type: ignore[arg-type]
    )  # fmt: skip
    assert sorted(h.payload["path"] for h in everything) == ["src/f10.txt", "src/f11.txt"]
