"""The field's known ways of losing sync, each found by ``verify`` and fixed by ``--repair``.

Indexing tools lost entries silently in 2026 in these ways: the store lost points
behind a correct manifest (most points gone while every run reported success); a crash
after a document's hash was recorded but before its points were written; a document
of many chunks written in several batches, one failing; the store's folder gone while
the state survived; a rule change that had to re-chunk only the documents it governs;
a deletion racing a first ingest. Each case here makes the fault happen, then checks
that ``verify`` finds the difference (naming what differs) and that ``verify
--repair``, or the next start, brings the store back to a from-scratch ingest.

Cases pinned elsewhere, which these extend with the ``verify`` step: the next sync
repairing lost points (``test_damaged_state.py``,
``test_lost_points_are_written_again_from_the_cache``), a start-up repairing a lost
store (``test_daemon_start_up_repairs_a_lost_half``), SIGKILL at every write step
repaired by the next sync (``tests/daemon/sync/test_crash.py``), a rule change
planning only its documents (``tests/daemon/sync/test_engine.py``,
``test_rule_change_rechunks_only_its_documents``).
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ingestd.store.vectors.base import StoreUnavailableError
from tests.daemon.sync.test_crash import run_killed_sync
from tests.helpers import (
    CountingEmbedder,
    assert_matches_oracle,
    copy_tree,
    fake_vectors,
    ingested_tree,
    make_engine,
    open_state_store,
    store_class,
    store_folder,
    store_snapshot,
)

GLOSSARY = "docs/concepts/glossary.md"


def _verify(
    root: Path, state: Path, embed: Any = fake_vectors, *, repair: bool = False, **overrides: Any
) -> Any:
    """``verify`` (or ``verify --repair``) by a fresh engine, as the command runs it."""
    eng = make_engine(root, state, embed, **overrides)
    try:
        return eng.verify(next(iter(eng.context.sources)), repair=repair)
    finally:
        eng.close()


def _next_start(root: Path, state: Path, embed: Any = fake_vectors) -> Any:
    """A plain sync by a fresh engine: what the next start (or ``resync``) does."""
    eng = make_engine(root, state, embed)
    try:
        name = next(iter(eng.context.sources))
        eng.sync(name)
        return eng.verify(name)
    finally:
        eng.close()


def _lose_most_points(state: Path) -> set[str]:
    store = open_state_store(state)
    try:
        ids = sorted(pid for pid, _ in store.scroll("ingestd"))
        gone = ids[: int(len(ids) * 0.9)]
        store.delete("ingestd", gone)
    finally:
        store.close()
    return set(gone)


def _lose_the_store_folder(state: Path) -> set[str]:
    ids = set(store_snapshot(state))
    shutil.rmtree(store_folder(state))
    return ids


@pytest.mark.parametrize(
    ("lose", "fix"),
    [
        (_lose_most_points, "repair"),
        (_lose_the_store_folder, "repair"),
        (_lose_the_store_folder, "next start"),
    ],
)
def test_points_lost_behind_a_correct_manifest_are_found_and_written_again(
    tmp_path: Path, lose: Callable[[Path], set[str]], fix: str
) -> None:
    root, state = ingested_tree(tmp_path)
    gone = lose(state)
    rep = _verify(root, state)
    assert not rep.clean and set(rep.missing) == gone, rep.as_dict()
    assert not rep.orphans and not rep.stale
    emb = CountingEmbedder(fake_vectors)
    if fix == "repair":
        after = _verify(root, state, emb, repair=True)
    else:
        after = _next_start(root, state, emb)
    assert after.clean, after.as_dict()
    assert emb.texts == [], "the lost points' vectors come from the embedding cache"
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


@pytest.mark.parametrize(("target", "when"), [("add_pending_many", "after"), ("upsert", "before")])
def test_a_crash_after_the_ids_are_recorded_before_the_points_are_written_is_found(
    tmp_path: Path, target: str, when: str
) -> None:
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    assert run_killed_sync(root, state, target, when, 1) == -signal.SIGKILL
    rep = _verify(root, state)
    assert not rep.clean and rep.missing and rep.manifest, rep.as_dict()
    assert _verify(root, state, repair=True).clean
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def _long_page(sections: int = 90) -> str:
    body = "The collector receives, processes and exports telemetry data. " * 12
    return "# Long\n\n" + "".join(f"## Part {i}\n\n{i}. {body}\n\n" for i in range(sections))


def test_a_document_written_in_slices_with_one_failing_is_found_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_tree(tmp_path / "docs", (GLOSSARY,))
    (root / "long.md").write_text(_long_page())
    state = tmp_path / "state"
    cls = store_class()
    upsert = cls.upsert
    calls: list[int] = []

    def second_slice_fails(self: Any, collection: str, points: Sequence[Any]) -> None:
        calls.append(len(points))
        if len(calls) == 2:
            raise StoreUnavailableError("the store refused the second slice")
        upsert(self, collection, points)

    monkeypatch.setattr(cls, "upsert", second_slice_fails)
    eng = make_engine(root, state, fake_vectors)
    try:
        with pytest.raises(StoreUnavailableError):
            eng.sync(next(iter(eng.context.sources)))
    finally:
        eng.close()
    monkeypatch.setattr(cls, "upsert", upsert)
    assert calls[0] == 32, "the document is written in slices"
    rep = _verify(root, state)
    assert not rep.clean and "long.md" in rep.manifest and rep.missing, rep.as_dict()
    assert _verify(root, state, repair=True).clean
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_a_rule_change_is_found_in_its_documents_only_and_repaired_there_only(
    tmp_path: Path,
) -> None:
    root, state = ingested_tree(tmp_path)
    before = store_snapshot(state, sparse=False)
    rules = [
        {"name": "glossary", "match": [GLOSSARY], "chunker": "token", "params": {"max_tokens": 64}},
        {"name": "markdown", "match": ["*.md"], "chunker": "markdown"},
    ]
    rep = _verify(root, state, rules=rules)
    assert not rep.clean and rep.manifest == [GLOSSARY], rep.as_dict()
    differ = {pid for k in ("missing", "orphans", "stale") for pid in getattr(rep, k)}
    others = {pid for pid, p in before.items() if p["path"] != GLOSSARY}
    assert differ and not differ & others, "only the glossary's points differ"
    emb = CountingEmbedder(fake_vectors)
    assert _verify(root, state, emb, repair=True, rules=rules).clean
    after = store_snapshot(state, sparse=False)
    assert {pid for pid, p in after.items() if p["path"] != GLOSSARY} == others
    glossary = [p for p in after.values() if p["path"] == GLOSSARY]
    assert glossary and {p["rule"] for p in glossary} == {"glossary"}
    assert 0 < len(emb.texts) <= len(glossary), "only the glossary's chunks are embedded"


def test_a_file_deleted_during_the_first_ingest_is_found_and_its_points_removed(
    tmp_path: Path,
) -> None:
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    victim = root / GLOSSARY

    def delete_while_embedding(texts: Sequence[str]) -> Any:
        victim.unlink(missing_ok=True)  # read already, being written now
        return fake_vectors(texts)

    eng = make_engine(root, state, delete_while_embedding)
    try:
        eng.sync(next(iter(eng.context.sources)))
    finally:
        eng.close()
    assert not victim.exists()
    written = {pid for pid, p in store_snapshot(state).items() if p["path"] == GLOSSARY}
    rep = _verify(root, state)
    assert not rep.clean and GLOSSARY in rep.manifest, rep.as_dict()
    assert set(rep.orphans) == written and written
    assert _verify(root, state, repair=True).clean
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
