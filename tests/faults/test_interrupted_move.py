"""A folder move interrupted between its new paths and its old deletions is finished.

A move is written as new paths first, old deletions last. Interrupted in between (kill
-9, or SIGTERM of ``run``), it leaves the old paths' documents in the manifest while
their files are gone: the next scan must delete them as the end of a move, not hold
them as a mass deletion. A tree that really vanished is still held.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import assert_matches_oracle, copy_tree, fake_vectors, make_engine

FOLDER_FILES = 14  # over the guard's thresholds: > 10 and > 20 % of the documents


def _tree(root: Path) -> None:
    copy_tree(root, ("docs/concepts/glossary.md",))
    for i in range(FOLDER_FILES):
        p = root / "guides" / f"g{i:02d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# Guide {i}\n\nStep {i} of the set-up.\n")


def _ingested(tmp: Path) -> tuple[Path, Path, str]:
    root, state = tmp / "docs", tmp / "state"
    _tree(root)
    eng = make_engine(root, state, fake_vectors)
    name = next(iter(eng.context.sources))
    eng.sync(name)
    eng.close()
    return root, state, name


def _apply_without_deletions(root: Path, state: Path, name: str, paths: list[str]) -> None:
    """Sync ``paths`` as the daemon would, but stop before the deletions (the interrupt)."""
    eng = make_engine(root, state, fake_vectors)
    try:
        plan = eng.plan(name, paths)
        assert plan.delete, "the plan deletes the old paths last"
        plan.delete = []
        eng.apply(plan)
    finally:
        eng.close()


def test_interrupted_folder_move_is_finished_by_a_scan(tmp_path: Path) -> None:
    root, state, name = _ingested(tmp_path)
    os.rename(root / "guides", root / "handbook")
    _apply_without_deletions(root, state, name, ["guides", "handbook"])
    eng = make_engine(root, state, fake_vectors)
    try:
        res = eng.sync(name)
        assert not res.held and res.deleted == FOLDER_FILES
        assert eng.verify(name).clean
    finally:
        eng.close()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_interrupted_move_of_uncommitted_documents_is_finished(tmp_path: Path) -> None:
    """Killed after the new paths' pending ids, before their commit, then moved back."""
    root, state, name = _ingested(tmp_path)
    os.rename(root / "guides", root / "handbook")
    eng = make_engine(root, state, fake_vectors)
    try:
        docs = eng.resources.manifest.upsert_documents(
            name, [f"handbook/g{i:02d}.md" for i in range(14)]
        )
        assert all(
            d.state == "new" for d in eng.resources.manifest.documents(name, "handbook").values()
        )
        assert len(docs) == FOLDER_FILES
    finally:
        eng.close()
    os.rename(root / "handbook", root / "guides")
    eng = make_engine(root, state, fake_vectors)
    try:
        res = eng.sync(name)
        assert not res.held
        assert eng.verify(name).clean
    finally:
        eng.close()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_vanished_folder_is_still_held(tmp_path: Path) -> None:
    root, state, name = _ingested(tmp_path)
    for p in (root / "guides").iterdir():
        p.unlink()
    eng = make_engine(root, state, fake_vectors)
    try:
        res = eng.sync(name)
        assert len(res.held) == FOLDER_FILES and res.deleted == 0
    finally:
        eng.close()


def test_deleted_copy_of_a_kept_document_is_no_mass_deletion(tmp_path: Path) -> None:
    """Deleting copies whose content is committed under another path loses nothing."""
    root, state, _ = _ingested(tmp_path)
    for i in range(FOLDER_FILES):
        (root / "copies").mkdir(exist_ok=True)
        (root / "copies" / f"g{i:02d}.md").write_bytes((root / f"guides/g{i:02d}.md").read_bytes())
    eng = make_engine(root, state, fake_vectors)
    try:
        name = next(iter(eng.context.sources))
        eng.sync(name)
        for p in (root / "guides").iterdir():
            p.unlink()
        res = eng.sync(name)
        assert not res.held and res.deleted == FOLDER_FILES
    finally:
        eng.close()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
