"""The payload of a point shared by versions: merged, and each version's view given back."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ingestd.daemon.sources.versions import (
    BY_VERSION_KEY,
    document_keys,
    merge_versions,
    payload_versions,
    strip_keys,
    version_view,
)

KEYS = ("doc_hash", "ordinal", "start_char", "end_char", "commit", "parent_id", "text")


def _payload(version: str, **fields: Any) -> dict[str, Any]:
    return {"source": "book", "path": "src/a.md", "chunk_hash": "h", "version": version, **fields}


def test_the_first_version_gives_the_fields_and_the_others_their_differences() -> None:
    v1 = _payload("v1", start_char=0, end_char=10, commit="c1", parent_id="p")
    v2 = _payload("v2", start_char=5, end_char=15, commit="c2")
    merged = merge_versions({"v2": v2, "v1": v1})
    assert merged["version"] == ["v1", "v2"]
    assert merged["start_char"] == 0 and merged["commit"] == "c1"
    assert merged[BY_VERSION_KEY] == {
        "v2": {"start_char": 5, "end_char": 15, "commit": "c2", "-": ["parent_id"]}
    }
    assert version_view(merged, "v1") == v1
    assert version_view(merged, "v2") == v2
    assert version_view(merged) == v1  # no version: the first
    assert version_view(merged, "v9") == v1  # not holding it: the first
    assert payload_versions(merged) == ["v1", "v2"]
    assert document_keys(merged) == ["v1:src/a.md", "v2:src/a.md"]


def test_equal_versions_need_no_differences_and_a_local_payload_is_left_alone() -> None:
    merged = merge_versions({"v1": _payload("v1", ordinal=3), "v2": _payload("v2", ordinal=3)})
    assert BY_VERSION_KEY not in merged and merged["version"] == ["v1", "v2"]
    local = {"source": "docs", "path": "a:b.md", "ordinal": 1}
    assert version_view(local, "v1") == local
    assert document_keys(local) == ["a:b.md"]


def test_stripping_provenance_reaches_each_versions_differences() -> None:
    merged = merge_versions(
        {"v1": _payload("v1", commit="c1"), "v2": _payload("v2", commit="c2", ordinal=2)}
    )
    stripped = strip_keys(merged, frozenset({"commit"}))
    assert "commit" not in stripped
    assert stripped[BY_VERSION_KEY] == {"v2": {"ordinal": 2}}
    only_commit = merge_versions(
        {"v1": _payload("v1", commit="a"), "v2": _payload("v2", commit="b")}
    )
    assert BY_VERSION_KEY not in strip_keys(only_commit, frozenset({"commit"}))


values = st.one_of(
    st.none(), st.integers(-3, 3), st.text(max_size=3), st.lists(st.integers(), max_size=2)
)
fields = st.dictionaries(st.sampled_from(KEYS), values, max_size=len(KEYS))
versions = st.dictionaries(
    st.from_regex(r"v[0-9]{1,2}", fullmatch=True), fields, min_size=1, max_size=4
)


@given(versions)
def test_every_versions_view_is_its_payload_whatever_the_order(held: dict[str, Any]) -> None:
    views = {v: _payload(v, **f) for v, f in held.items()}
    merged = merge_versions(views)
    assert merge_versions(dict(reversed(list(views.items())))) == merged
    for v, p in views.items():
        assert version_view(merged, v) == p
    assert merge_versions({v: version_view(merged, v) for v in held}) == merged
