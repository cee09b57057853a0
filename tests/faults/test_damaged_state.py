"""Damaged state heals, or says exactly how (and the rebuild it names works).

The state's two halves describe each other: the manifest records every point id, and
every point's payload carries what the manifest records for it. Each case damages one
part the way an operator's bad day does (points or a whole collection lost, the
manifest deleted or emptied, a file overwritten with garbage, a full disk), then
checks that the next plain sync, or the one command named in the error, ends with the
store equal to a from-scratch ingest and ``verify`` clean.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from tests.helpers import (
    REPO,
    CountingEmbedder,
    assert_matches_oracle,
    copy_tree,
    engine_under_test,
    fake_vectors,
    ingested_tree,
    make_engine,
    open_state_store,
    run_cli,
    store_class,
    store_folder,
    store_snapshot,
)

FAKE_CLI = ["-m", "tests.faults.fakecli"]


def _sync_and_verify(root: Path, state: Path, embed: Any, **overrides: Any) -> Any:
    """One plain scan, then verify: returns ``(result, report)``."""
    eng = make_engine(root, state, embed, **overrides)
    try:
        name = next(iter(eng.context.sources))
        res = eng.sync(name)
        rep = eng.verify(name)
    finally:
        eng.close()
    return res, rep


def _edit(root: Path) -> None:
    (root / "docs/concepts/glossary.md").unlink()
    p = root / "docs/collector/quick-start.md"
    p.write_text(p.read_text() + "\n\nOne more paragraph about the collector.\n")


def _drop_points(state: Path, share: float) -> int:
    client = open_state_store(state)
    try:
        ids = sorted(pid for pid, _ in client.scroll("ingestd"))
        gone = ids[: max(1, int(len(ids) * share))]
        client.delete("ingestd", gone)
    finally:
        client.close()
    return len(gone)


def _drop_collection(state: Path) -> int:
    client = open_state_store(state)
    try:
        n = client.point_count("ingestd")
        physical = client.layout("ingestd").physical  # "ingestd" is an alias of it
        assert physical is not None
        client.drop_collection(physical)
    finally:
        client.close()
    return n


def _delete_folder(state: Path) -> int:
    n = len(store_snapshot(state))
    shutil.rmtree(store_folder(state))
    return n


@pytest.mark.parametrize(
    "damage", [lambda s: _drop_points(s, 0.3), _drop_collection, _delete_folder]
)
def test_lost_points_are_written_again_from_the_cache(
    tmp_path: Path, damage: Callable[[Path], int]
) -> None:
    root, state = ingested_tree(tmp_path)
    lost = damage(state)
    emb = CountingEmbedder(fake_vectors)
    res, rep = _sync_and_verify(root, state, emb)
    assert res.repaired == {"rewritten": lost}
    assert emb.texts == [], "vectors come from the embedding cache"
    assert rep.clean, rep.as_dict()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_vectors_the_cache_evicted_are_embedded_again(tmp_path: Path) -> None:
    root, state = ingested_tree(tmp_path, embedding={"cache_max_entries": 20})
    lost = _delete_folder(state)
    emb = CountingEmbedder(fake_vectors)
    res, rep = _sync_and_verify(root, state, emb, embedding={"cache_max_entries": 20})
    assert res.repaired == {"rewritten": lost}
    assert lost - 20 <= len(emb.texts) <= lost  # the cache kept at most 20
    assert rep.clean, rep.as_dict()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_payload_update_of_a_missing_point_is_an_upsert(tmp_path: Path) -> None:
    """A changed-paths sync (no check first) keeps a point the store lost: upserted whole."""
    root, state = ingested_tree(tmp_path)
    rel = "docs/concepts/glossary.md"
    eng = make_engine(root, state, fake_vectors)
    try:
        name = next(iter(eng.context.sources))
        doc = eng.resources.manifest.document(name, rel)
        assert doc is not None
        ids = [c.point_id for c in eng.resources.manifest.chunks(doc.id)]
        eng.resources.store.delete("ingestd", ids[5:])  # kept points of the edit below
        p = root / rel
        p.write_text("# Preface\n\nA new first section moves every ordinal.\n\n" + p.read_text())
        res = eng.sync(name, [rel])
        assert res.indexed == 1
        rep = eng.verify(name)
    finally:
        eng.close()
    assert rep.clean, rep.as_dict()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_lost_manifest_is_rebuilt_from_the_store(tmp_path: Path, how: str) -> None:
    root, state = ingested_tree(tmp_path)
    n = len(store_snapshot(state))
    db = state / "manifest.db"
    if how == "deleted":
        for f in state.glob("manifest.db*"):
            f.unlink()
    else:
        db.write_bytes(b"")
        for f in state.glob("manifest.db-*"):
            f.unlink()
    _edit(root)  # a file deleted and one changed while the manifest was gone
    emb = CountingEmbedder(fake_vectors)
    res, rep = _sync_and_verify(root, state, emb)
    assert res.repaired == {"adopted": n}
    assert res.deleted == 1 and res.indexed == 1
    assert len(emb.texts) <= 2, "only the edited chunks are embedded"
    assert rep.clean, rep.as_dict()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


@pytest.mark.engine("local")  # an Edge store opens in a tenth of a second: it is counted open
def test_agreeing_counts_open_no_store(tmp_path: Path) -> None:
    """The check of a no-op scan counts a local-mode store's rows without opening it."""
    root, state = ingested_tree(tmp_path)
    eng = make_engine(root, state, fake_vectors)
    try:
        plan = eng.plan(next(iter(eng.context.sources)))
        assert plan.empty and not plan.repaired
        assert not eng.resources.store_open
    finally:
        eng.close()


def test_damaged_embedding_cache_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root, state = ingested_tree(tmp_path)
    shutil.rmtree(store_folder(state))  # every vector is needed again
    (state / "embeddings.db").write_bytes(b"not a database at all" * 100)
    for f in state.glob("embeddings.db-*"):
        f.unlink()
    emb = CountingEmbedder(fake_vectors)
    res, rep = _sync_and_verify(root, state, emb)
    assert rep.clean, rep.as_dict()
    assert res.repaired and len(emb.texts) == res.repaired["rewritten"]
    assert "embedding cache" in caplog.text and "moved aside" in caplog.text
    assert len(list(state.glob("embeddings.db.damaged-*"))) == 1
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_cache_damaged_while_in_use_is_replaced() -> None:
    from ingestd.daemon.sync.state.healing_cache import HealingCache

    class Flaky:
        def __init__(self) -> None:
            self.closed = False

        def get_many(self, model: str, hashes: Any) -> dict[str, Any]:
            raise sqlite3.DatabaseError("database disk image is malformed")

        def close(self) -> None:
            self.closed = True

    opened: list[Flaky] = []

    def open_cache(path: Path, n: int) -> Flaky:
        opened.append(Flaky())
        return opened[-1]

    cache = HealingCache(Path("/nonexistent/embeddings.db"), 10, open_cache)
    assert cache.get_many("m", ["h"]) == {}
    assert len(opened) == 2 and opened[0].closed


# -- one line naming the file, and the command that rebuilds it --------------------------------


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00garbage, not what was here\xff" * 200)


def _cli(*args: str, timeout: float = 120) -> Any:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, *FAKE_CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def _torn_wal(state: Path) -> None:
    """Every file of the Edge shard's write-ahead log overwritten with garbage."""
    wal = state / "edge/collections/ingestd__v1/wal"
    for f in wal.rglob("*"):
        if f.is_file():
            _garbage(f)


#: Per engine: ``(damage, the file or folder the error names)``; the manifest's first.
DAMAGES: dict[str, list[tuple[Callable[[Path], None], str]]] = {
    "local": [
        (lambda s: _garbage(s / "qdrant/collection/ingestd__v1/storage.sqlite"), "storage.sqlite"),
        (lambda s: (s / "qdrant/meta.json").write_text('{"collections": {"ing'), "meta.json"),
    ],
    "edge": [
        (_torn_wal, "ingestd__v1"),
        (lambda s: (s / "edge/edge.json").write_text('{"format": 1, "alia'), "edge.json"),
    ],
}


@pytest.mark.parametrize("which", ["manifest", "store-points", "store-meta"])
def test_damaged_file_is_named_with_the_command_that_rebuilds_it(
    tmp_path: Path, which: str, qdrant_engine: str
) -> None:
    if which == "manifest":
        damage, named = (lambda s: _garbage(s / "manifest.db")), "manifest.db"
    else:
        damage, named = DAMAGES[qdrant_engine][0 if which == "store-points" else 1]
    root, state = ingested_tree(tmp_path)
    damage(state)
    _edit(root)
    common = ["--state-dir", str(state)]
    line = ""
    for args in (
        ["resync", *common, str(root)],
        ["verify", *common, str(root)],
        ["status", *common],
    ):
        proc = _cli(*args)
        assert proc.returncode == 1, proc.stderr
        # one error line; log lines (e.g. the state files made private again) may precede it
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("Error:")]
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        line = lines[0]
        assert named in line and "is damaged" in line
    command = line.split("`")[1]
    assert command.startswith("ingestd resync --rebuild")
    fixed = _cli(*command.split()[1:], timeout=300)
    assert fixed.returncode == 0, fixed.stderr
    assert list(state.glob("*.damaged-*")), "the damaged part is kept, renamed"
    verify = _cli("verify", *common, str(root))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_rebuild_without_paths_finds_the_sources_in_the_store(tmp_path: Path) -> None:
    root, state = ingested_tree(tmp_path)
    _garbage(state / "manifest.db")
    proc = _cli("status", "--state-dir", str(state))
    assert proc.returncode == 1
    assert f"`ingestd resync --rebuild --state-dir {state}`" in proc.stderr
    fixed = _cli("resync", "--rebuild", "--state-dir", str(state), timeout=300)
    assert fixed.returncode == 0, fixed.stderr
    assert str(root) in fixed.stdout
    verify = _cli("verify", "--state-dir", str(state))
    assert verify.returncode == 0, verify.stdout + verify.stderr


# -- disk full ----------------------------------------------------------------------------------


def _enospc(*_a: Any, **_k: Any) -> Any:
    raise OSError(errno.ENOSPC, "No space left on device")


def _sqlite_full(*_a: Any, **_k: Any) -> Any:
    from sqlalchemy.exc import OperationalError

    raise OperationalError("INSERT", {}, sqlite3.OperationalError("database or disk is full"))


@pytest.mark.parametrize(
    ("owner", "method", "fault"),
    [("store", "upsert", _enospc), ("manifest", "add_pending_many", _sqlite_full)],
)
def test_disk_full_gives_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owner: str, method: str, fault: Any
) -> None:
    from ingestd.daemon import engine as engine_mod
    from ingestd.store.manifest.manifest import Manifest

    root = copy_tree(tmp_path / "docs")
    init = engine_mod.Engine.__init__

    def fake_init(self: Any, *a: Any, **k: Any) -> None:
        k.setdefault("embed_model", fake_vectors)
        init(self, *a, **k)

    monkeypatch.setattr(engine_mod.Engine, "__init__", fake_init)
    monkeypatch.setattr(store_class() if owner == "store" else Manifest, method, fault)
    res = CliRunner().invoke(cli, ["resync", "--state-dir", str(tmp_path / "state"), str(root)])
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: no space left"), res.stderr


@pytest.mark.slow
def test_lost_store_is_rebuilt_with_the_real_model(tmp_path: Path) -> None:
    """End to end: `ingestd resync` (real model) after the store and the cache were deleted."""
    root = copy_tree(tmp_path / "docs", ("docs/concepts/glossary.md",))
    state = tmp_path / "state"
    args = ["--state-dir", str(state), str(root)]
    assert run_cli("resync", *args, timeout=300).returncode == 0
    shutil.rmtree(store_folder(state))
    for f in state.glob("embeddings.db*"):
        f.unlink()
    again = run_cli("resync", *args, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "lost points written again" in again.stderr
    verify = run_cli("verify", *args, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_status_is_unhealthy_while_a_batch_waits_after_disk_full(
    tmp_path: Path, no_thread_leaks: None
) -> None:
    from tests.daemon.harness import Harness, fast_tmp
    from tests.helpers import wait_for

    full = {"on": False}

    class FullDisk(store_class()):  # type: ignore[misc]
        def upsert(self, collection: str, points: Any) -> None:
            if full["on"]:
                _enospc()
            super().upsert(collection, points)

    root = copy_tree(tmp_path / "docs")
    with fast_tmp() as state:
        h = Harness(
            root,
            state,
            CountingEmbedder(fake_vectors),
            store_factory=lambda d: FullDisk(path=str(store_folder(d)), engine=engine_under_test()),
        )
        with h.start():
            assert h.service.status()["daemon"]["healthy"]
            full["on"] = True
            (root / "docs/new.md").write_text("# New\n\nA page written while the disk is full.\n")
            st = wait_for(
                lambda: (s := h.service.status()["daemon"])["last_error"] and s,
                30,
                "the failed batch to be reported",
            )
            assert not st["healthy"]
            assert "No space left" in next(iter(st["last_error"].values()))
            full["on"] = False
            h.settle(timeout=60)
            assert h.service.status()["daemon"]["healthy"]
            h.assert_matches_oracle(tmp_path)


@pytest.mark.parametrize("lose", ["store", "manifest"])
def test_daemon_start_up_repairs_a_lost_half(
    tmp_path: Path, lose: str, no_thread_leaks: None
) -> None:
    from tests.daemon.harness import Harness

    root, state = ingested_tree(tmp_path)
    if lose == "store":
        shutil.rmtree(store_folder(state))
    else:
        for f in state.glob("manifest.db*"):
            f.unlink()
    _edit(root)
    emb = CountingEmbedder(fake_vectors)
    with Harness(root, state, emb).start(timeout=120) as h:
        h.settle(timeout=60)
        h.assert_matches_oracle(tmp_path)
    assert len(emb.texts) <= 2, "only the edited chunks are embedded"
