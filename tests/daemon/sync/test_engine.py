"""The sync engine keeps the store equal to a from-scratch ingest (the invariant).

Each test edits a tree of real md-docs pages, syncs incrementally, and compares the
store, opened directly with qdrant-client, with the oracle: a from-scratch ingest of
the final tree into a fresh state dir (ids and payload; provenance excluded).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import (
    MD_DOCS,
    CountingEmbedder,
    assert_matches_oracle,
    fake_vectors,
    make_engine,
    store_snapshot,
)


def _sync(eng, paths=None, **kw):
    (name,) = eng.context.sources
    return eng.sync(name, paths, **kw)


def test_first_ingest_then_noop(
    tree: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    res = _sync(eng)
    assert res.indexed == 6 and res.failed == 0
    assert res.chunks_written > 30
    n = len(fake_embedder.texts)
    again = _sync(eng)
    assert (again.indexed, again.deleted, again.chunks_written) == (0, 0, 0)
    assert len(fake_embedder.texts) == n, "a no-op sync embedded something"
    name = next(iter(eng.context.sources))
    assert eng.verify(name).clean
    eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


def test_edit_add_rename_delete_match_oracle(
    tree: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    _sync(eng)
    first = len(fake_embedder.texts)

    # one-paragraph edit: only the touched chunk(s) are embedded again
    p = tree / "docs/concepts/glossary.md"
    text = p.read_text()
    p.write_text(text.replace("## Aggregation", "## Aggregation\n\nA new sentence about sums.", 1))
    # rename: no embedding at all
    os.rename(tree / "docs/collector/quick-start.md", tree / "docs/collector/start-here.md")
    # delete
    (tree / "docs/languages/python/exporters.md").unlink()
    # add a copy of an existing file: every chunk text is known, nothing embedded
    shutil.copyfile(tree / "docs/concepts/signals/traces.md", tree / "docs/traces-copy.md")

    res = _sync(eng)
    assert res.deleted == 2  # exporters.md and the old name of quick-start.md
    new_texts = fake_embedder.texts[first:]
    assert 1 <= len(new_texts) <= 3, f"re-embedded {len(new_texts)} chunks for one edit"
    assert all("A new sentence about sums." in t for t in new_texts)
    name = next(iter(eng.context.sources))
    assert eng.verify(name).clean
    eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


def test_rename_is_rekeyed_without_embedding_even_with_empty_cache(
    tree: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    _sync(eng)
    eng.close()
    (state / "embeddings.db").unlink()  # vectors now come from the old points
    for suffix in ("-wal", "-shm"):
        (state / f"embeddings.db{suffix}").unlink(missing_ok=True)
    eng = make_engine(tree, state, fake_embedder)
    n = len(fake_embedder.texts)
    os.rename(tree / "docs/collector", tree / "docs/otel-collector")
    plan = eng.plan(next(iter(eng.context.sources)))
    assert len(plan.moves) == 3
    _sync(eng)
    assert len(fake_embedder.texts) == n
    eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


def test_rule_change_rechunks_only_its_documents(
    tree: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    from ingestd.daemon.config import RuleConfig

    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    _sync(eng)
    eng.close()
    rules = [
        RuleConfig(
            name="glossary",
            match=("docs/concepts/glossary.md",),
            chunker="token",
            params={"max_tokens": 64, "overlap": 8},
        ),
        RuleConfig(name="markdown", match=("*.md",), chunker="markdown"),
    ]
    eng = make_engine(tree, state, fake_embedder, rules=[r.model_dump() for r in rules])
    plan = eng.plan(next(iter(eng.context.sources)))
    assert plan.index == ["docs/concepts/glossary.md"]
    _sync(eng)
    assert eng.verify(next(iter(eng.context.sources))).clean
    eng.close()


def test_broken_files_do_not_harm_others(
    tree: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    state = tmp_path / "state"
    (tree / "latin1.md").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (tree / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    eng = make_engine(tree, state, fake_embedder)
    res = _sync(eng)
    assert res.failed == 2 and res.indexed == 6
    name = next(iter(eng.context.sources))
    failed = dict(eng.resources.manifest.failed(name))
    assert "not valid UTF-8 (byte 0xe9 at offset 3)" in failed["latin1.md"]
    assert "binary" in failed["binary.txt"]
    assert eng.verify(name).clean
    # fixing the file indexes it
    (tree / "latin1.md").write_text("café au lait\n")
    res = _sync(eng)
    assert res.indexed == 1 and not eng.resources.manifest.failed(name)[:-1]
    eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


def test_mass_deletion_guard_holds_scan_deletes(
    tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(20):
        (root / f"page{i}.md").write_text(f"# Page {i}\n\nSome text number {i}.\n")
    state = tmp_path / "state"
    eng = make_engine(root, state, fake_embedder)
    _sync(eng)
    for i in range(15):
        (root / f"page{i}.md").unlink()
    res = _sync(eng)
    assert len(res.held) == 15 and res.deleted == 0
    assert len(manifest_paths(eng)) == 20
    res = _sync(eng, allow_mass_delete=True)
    assert res.deleted == 15
    eng.close()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def manifest_paths(eng) -> list[str]:
    name = next(iter(eng.context.sources))
    return [r.path for r in eng.resources.manifest.iter_documents(name)]


def test_event_paths_folder_moved_out(tree: Path, tmp_path: Path, fake_embedder) -> None:
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    _sync(eng)
    shutil.move(str(tree / "docs/collector"), str(tmp_path / "elsewhere"))
    res = _sync(eng, ["docs/collector"])
    assert res.deleted == 3
    shutil.move(str(tmp_path / "elsewhere"), str(tree / "docs/collector"))
    n = len(fake_embedder.texts)
    res = _sync(eng, ["docs/collector"])
    assert res.indexed == 3 and len(fake_embedder.texts) == n
    eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


@pytest.mark.slow
def test_real_model_incremental_equals_from_scratch(
    tree: Path, tmp_path: Path, real_embedder: CountingEmbedder
) -> None:
    """End to end with the real model: vectors of kept points equal fresh ones."""
    import numpy as np

    from tests.helpers import state_dense_vectors

    state = tmp_path / "state"
    eng = make_engine(tree, state, real_embedder)
    _sync(eng)
    p = tree / "docs/collector/architecture.md"
    p.write_text(p.read_text() + "\n\n## Appendix\n\nThe collector can also be run as a sidecar.\n")
    os.rename(tree / "docs/concepts/glossary.md", tree / "docs/glossary.md")
    _sync(eng)
    eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)  # ids and payload need no model
    fresh = tmp_path / "fresh"
    eng2 = make_engine(tree, fresh, real_embedder.fn)
    _sync(eng2)
    eng2.close()
    ids = list(store_snapshot(fresh))
    va, vb = state_dense_vectors(state), state_dense_vectors(fresh)
    assert set(va) == set(vb) == set(ids)
    cos = [float(np.dot(va[i], vb[i])) for i in ids]
    assert min(cos) >= 0.999


def test_md_docs_corpus_exists() -> None:
    assert (MD_DOCS / "docs").is_dir(), "the shared corpora must sit beside the repository"


def test_verify_finds_and_repairs_drift(tree: Path, tmp_path: Path, fake_embedder) -> None:
    from ingestd.store.vectors.base import Point

    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    name = next(iter(eng.context.sources))
    _sync(eng)
    ids = sorted(eng.resources.manifest.chunks_of_source(name))
    eng.resources.store.delete("ingestd", ids[:2])  # missing
    eng.resources.store.set_payload("ingestd", [(ids[5], {"text": "tampered"})])  # stale
    orphan = "00000000-0000-4000-8000-000000000001"
    eng.resources.store.upsert("ingestd", [Point(orphan, fake_vectors(["x"])[0], {"source": name})])
    report = eng.verify(name)
    assert set(report.missing) == set(ids[:2])
    assert report.stale == [ids[5]]
    assert report.orphans == [orphan]
    n = len(fake_embedder.texts)
    repaired = eng.verify(name, repair=True)
    assert repaired.clean, repaired.as_dict()
    assert len(fake_embedder.texts) == n, "repair re-embedded instead of using the cache"
    eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


def test_dry_run_plans_without_writing(tree: Path, tmp_path: Path, fake_embedder) -> None:
    from click.testing import CliRunner

    from ingestd.daemon.cli.main import cli

    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    _sync(eng)
    eng.close()
    os.rename(tree / "docs/collector/quick-start.md", tree / "docs/quick-start.md")
    (tree / "docs/concepts/glossary.md").unlink()
    (tree / "docs/new.md").write_text("# New\n\ntext\n")
    p = tree / "docs/collector/architecture.md"
    p.write_text(p.read_text() + "\nmore\n")
    before = store_snapshot(state)
    res = CliRunner().invoke(
        cli, ["resync", "--dry-run", "--json", "--state-dir", str(state), str(tree)]
    )
    assert res.exit_code == 0, res.output
    (plan,) = __import__("json").loads(res.stdout)["sources"]
    assert plan["add"] == ["docs/new.md"]
    assert plan["update"] == ["docs/collector/architecture.md"]
    assert plan["rekey"] == [{"from": "docs/collector/quick-start.md", "to": "docs/quick-start.md"}]
    assert plan["delete"] == ["docs/concepts/glossary.md"]
    assert store_snapshot(state) == before


def test_budget_over_the_model_is_reported(tmp_path: Path, caplog) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    rules = [{"match": ["*"], "chunker": "token", "params": {"max_tokens": 512, "overlap": 0}}]
    eng = make_engine(root, tmp_path / "s", fake_vectors, rules=rules)
    assert eng.profiles.profile.rule_warnings == [
        "rule 'token': max_tokens 512 is about 624 model word pieces; chunks are capped at "
        "the model's 254 instead"
    ]
    eng.close()
    eng = make_engine(
        root, tmp_path / "s2", fake_vectors, rules=rules, embedding={"fit_model": False}
    )
    assert "the model will silently drop the rest" in eng.profiles.profile.rule_warnings[0]
    assert "the model will silently drop the rest" in caplog.text
    eng.close()


def test_missing_root_deletes_nothing(tree: Path, tmp_path: Path, fake_embedder) -> None:
    """An unmounted volume is not a deletion of every document."""
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder)
    _sync(eng)
    before = store_snapshot_ids = set(
        eng.resources.manifest.chunks_of_source(next(iter(eng.context.sources)))
    )
    moved = tmp_path / "unmounted"
    tree.rename(moved)
    res = _sync(eng)
    assert res.root_missing and res.deleted == 0
    assert set(eng.resources.manifest.chunks_of_source(next(iter(eng.context.sources)))) == before
    moved.rename(tree)
    assert _sync(eng).indexed == 0
    eng.close()
    assert set(store_snapshot(state)) == store_snapshot_ids


def test_held_deletions_are_recorded_for_status(tmp_path: Path, fake_embedder) -> None:
    from ingestd.daemon.commands.status import status_of

    root = tmp_path / "docs"
    root.mkdir()
    for i in range(12):
        (root / f"p{i}.md").write_text(f"# P{i}\n\ntext {i}\n")
    eng = make_engine(root, tmp_path / "state", fake_embedder)
    _sync(eng)
    for i in range(12):
        (root / f"p{i}.md").unlink()
    assert len(_sync(eng).held) == 12
    st = status_of(eng.resources.manifest, None, tmp_path / "state")
    assert st["sources"][0]["held_deletes"] == 12
    _sync(eng, allow_mass_delete=True)
    assert (
        status_of(eng.resources.manifest, None, tmp_path / "state")["sources"][0]["held_deletes"]
        == 0
    )
    eng.close()


def test_files_that_become_ignored_or_excluded_are_deleted(
    tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    """A file still on disk that the source no longer indexes is deleted, guard or not.

    A path planned for deletion whose file exists again is left alone (it is back:
    its own change indexes it), but a file that a ``.gitignore`` or the config now
    leaves out is not back, however present it is.
    """
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    root = tmp_path / "docs"
    (root / "drafts").mkdir(parents=True)
    for i in range(12):
        (root / f"page{i}.md").write_text(f"# Page {i}\n\nSome text number {i}.\n")
        (root / f"drafts/draft{i}.md").write_text(f"# Draft {i}\n\nUnfinished text {i}.\n")
    state = tmp_path / "state"
    eng = make_engine(root, state, fake_embedder)
    assert _sync(eng).indexed == 24
    eng.close()

    (root / ".gitignore").write_text("page0.md\n")  # one file: under the guard's bound
    eng = make_engine(root, state, fake_embedder)
    assert _sync(eng).deleted == 1
    assert "page0.md" not in manifest_paths(eng)
    eng.close()
    (root / ".gitignore").write_text("page0.md\ndrafts/\n")  # half the source: held first
    eng = make_engine(root, state, fake_embedder)
    res = _sync(eng)
    assert len(res.held) == 12 and res.deleted == 0
    assert _sync(eng, allow_mass_delete=True).deleted == 12
    name = next(iter(eng.context.sources))
    assert eng.verify(name).clean
    eng.close()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)

    (root / ".gitignore").unlink()
    source = {"name": name, "root": str(root), "exclude": ["page1.md"]}
    cfg = load_config(None, overrides={"sources": [source]})
    eng = Engine(cfg, state, embed_model=fake_embedder)
    res = eng.sync(name)
    assert (res.indexed, res.deleted) == (13, 1)  # the drafts and page0 are back
    assert sorted(manifest_paths(eng)) == sorted(
        [f"page{i}.md" for i in range(12) if i != 1] + [f"drafts/draft{i}.md" for i in range(12)]
    )
    assert eng.verify(name).clean
    eng.close()
    (root / ".gitignore").write_text("page2.md\n")  # and repaired by verify, not synced
    eng = Engine(cfg, state, embed_model=fake_embedder)
    assert not eng.verify(name).clean
    assert eng.verify(name, repair=True).clean
    assert "page2.md" not in manifest_paths(eng)
    assert eng.verify(name).clean
    eng.close()
    assert not any(p["path"] in ("page1.md", "page2.md") for p in store_snapshot(state).values())
