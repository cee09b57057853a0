"""What a filter means is said once (``Filters.conditions``); engines only translate it.

Before, qdrant-client's filter and Qdrant Edge's were each built from ``Filters`` on
their own, so a new condition (or a new engine) had to repeat the meaning: which keys,
parents and pending points left out. The translations are pinned here against the
neutral conditions, and the Python reading of the conditions (``accepts``) against
both.
"""

from __future__ import annotations

import pytest

from ingestd.store.search.conditions import Conditions, Match, MatchAny
from ingestd.store.search.query import (
    HIDDEN_KEYS,
    PARENT_KEY,
    PATH_KEY,
    PENDING_KEY,
    Filters,
    client_filter,
    path_prefixes,
)


def test_a_search_filter_means_its_matches_and_no_hidden_point() -> None:
    got = Filters(source="s", path="./docs/a/").conditions()
    assert got == Conditions(
        must=(Match("source", "s"), Match(PATH_KEY, "docs/a")), unset=(PARENT_KEY, PENDING_KEY)
    )
    assert Filters().conditions() == Conditions(unset=HIDDEN_KEYS)
    legacy = Filters(path="docs/a.md").conditions(legacy=True)
    assert legacy.must == (Match("path", "docs/a.md"),)


def test_sources_are_conditions_without_flags() -> None:
    assert Conditions.of_source(None) is None and Conditions.of_sources(None) is None
    assert Conditions.of_source("s") == Conditions(must=(Match("source", "s"),))
    assert Conditions.of_sources(["a", "b"]) == Conditions(must=(MatchAny("source", ("a", "b")),))


@pytest.mark.parametrize(
    ("payload", "accepted"),
    [
        ({"source": "s", PATH_KEY: path_prefixes("docs/a/x.md")}, True),
        ({"source": "s", PATH_KEY: path_prefixes("docs/ab.md")}, False),
        ({"source": "t", PATH_KEY: path_prefixes("docs/a/x.md")}, False),
        ({"source": "s", PATH_KEY: path_prefixes("docs/a/x.md"), PARENT_KEY: True}, False),
        ({"source": "s", PATH_KEY: path_prefixes("docs/a/x.md"), PENDING_KEY: True}, False),
    ],
)
def test_accepts_reads_the_conditions_as_the_engines_do(payload: dict, accepted: bool) -> None:
    assert Filters(source="s", path="docs/a").conditions().accepts(payload) is accepted


def test_qdrant_client_translation_keeps_the_filter_it_always_had() -> None:
    from qdrant_client import models

    flt = client_filter(Filters(source="s", path="docs").conditions())
    assert flt == models.Filter(
        must=[
            models.FieldCondition(key="source", match=models.MatchValue(value="s")),
            models.FieldCondition(key=PATH_KEY, match=models.MatchValue(value="docs")),
        ],
        must_not=[
            models.FieldCondition(key=PARENT_KEY, match=models.MatchValue(value=True)),
            models.FieldCondition(key=PENDING_KEY, match=models.MatchValue(value=True)),
        ],
    )
    assert client_filter(Conditions.of_sources(["a"])) == models.Filter(
        must=[models.FieldCondition(key="source", match=models.MatchAny(any=["a"]))]
    )
    assert client_filter(None) is None


def test_edge_translation_excludes_flags_with_is_empty() -> None:
    pytest.importorskip("qdrant_edge")
    from ingestd.store.vectors.edge.edge import edge_filter

    flt = edge_filter(Filters(source="s").conditions())
    kinds = [type(c).__name__ for c in flt.must]
    assert kinds == ["IsEmptyCondition", "IsEmptyCondition", "FieldCondition"]
    assert [c.key for c in flt.must] == [PARENT_KEY, PENDING_KEY, "source"]
    assert edge_filter(None) is None
