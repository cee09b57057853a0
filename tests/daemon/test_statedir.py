"""Disk usage of a folder, as ``status`` and ``migrate --dry-run`` report it.

``status`` polls cost what changed, not what the index holds: the sizes of the state
dir's folders come from the last clean close's record, or from the daemon's last
measurement while the manifest is unchanged; a count of the entries listed and files
``stat``-ed pins it (no timing).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.daemon.statedir import dir_bytes, folder_bytes, state_dir_bytes
from ingestd.daemon.sync.state.clean_close import read_record
from tests.helpers import fake_vectors, ingested_tree, make_engine


def test_dir_bytes_counts_files_below_and_a_link_by_itself_or_its_target(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "weights").write_bytes(b"w" * 1000)
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "sub" / "config.json").write_bytes(b"c" * 10)
    link = model / "weights"
    link.symlink_to(blobs / "weights")
    (model / "blobs").symlink_to(blobs, target_is_directory=True)  # a linked folder: not walked

    assert dir_bytes(model, follow_symlinks=True) == 1010
    assert dir_bytes(model) == 10 + link.lstat().st_size
    assert dir_bytes(tmp_path / "missing") == 0


def test_state_dir_bytes_is_the_allocated_size_of_every_file_not_the_apparent_one(
    tmp_path: Path,
) -> None:
    """``status --json`` said 205 MB for a state dir whose disk held 4.5 MB: sparse files."""
    state = tmp_path / "state"
    (state / "eval-scratch").mkdir(parents=True)  # a folder no engine owns
    dense = state / "manifest.db"
    dense.write_bytes(b"m" * 100_000)
    for sparse in (state / "embeddings.db", state / "eval-scratch" / "blob"):
        with sparse.open("wb") as f:
            f.truncate(300_000_000)  # a hole: no block allocated
            f.write(b"x")
    (state / "outside").symlink_to(tmp_path, target_is_directory=True)  # not entered
    allocated = sum(
        p.lstat().st_blocks * 512 for p in state.rglob("*") if p.is_file() and not p.is_symlink()
    )
    allocated += (state / "outside").lstat().st_blocks * 512
    assert state_dir_bytes(state) == allocated
    assert 100_000 <= state_dir_bytes(state) < 1_000_000  # what `du` says, not 600 MB
    assert state_dir_bytes(tmp_path / "missing") == 0


class _Visits:
    """Counts what the process reads of folders: entries listed, files ``stat``-ed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entries = 0
        self.stats = 0
        real_scandir, real_stat, real_lstat = os.scandir, os.stat, os.lstat
        visits = self

        class Listing:  # os.scandir's iterator, counted (os.walk lists through it)
            def __init__(self, path: Any) -> None:
                self.it = real_scandir(path)

            def __enter__(self) -> Listing:
                return self

            def __exit__(self, *exc: object) -> None:
                self.it.close()

            def __iter__(self) -> Listing:
                return self

            def __next__(self) -> os.DirEntry[str]:
                entry = next(self.it)
                visits.entries += 1
                return entry

            def close(self) -> None:
                self.it.close()

        def stat(*a: Any, **k: Any) -> os.stat_result:
            visits.stats += 1
            return real_stat(*a, **k)

        def lstat(*a: Any, **k: Any) -> os.stat_result:
            visits.stats += 1
            return real_lstat(*a, **k)

        monkeypatch.setattr(os, "scandir", Listing)
        monkeypatch.setattr(os, "stat", stat)
        monkeypatch.setattr(os, "lstat", lstat)

    def during(self, fn: Callable[[], Any]) -> tuple[int, int, Any]:
        """``(entries listed, stat calls, fn's result)`` of one call of ``fn``."""
        e, s = self.entries, self.stats
        out = fn()
        return self.entries - e, self.stats - s, out


def _status_bytes(state: Path) -> int:
    """``disk.state_dir_bytes`` of ``status`` with no daemon (its report, apart from the
    damage check of the store's files: :func:`~ingestd.daemon.commands.status.local_status`)."""
    from ingestd.daemon.cli.shared.state import manifest_reader
    from ingestd.daemon.commands.status import local_status

    with manifest_reader(None, state) as m:
        return int(local_status(m, state)["disk"]["state_dir_bytes"])


def _pad_store(state: Path, n: int) -> None:
    """``n`` more files in a segment of the store, as a store of many more points has."""
    (segment,) = (state / "edge" / "collections" / "ingestd__v1" / "segments").iterdir()
    pad = segment / "padding"
    pad.mkdir()
    for i in range(n):
        (pad / f"page_{i}.dat").write_bytes(b"p" * 100)


@pytest.mark.engine("edge")
def test_status_lists_no_store_file_after_a_clean_close_however_many_the_store_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``status`` walked every file of the state dir for its size (0.18 s at 1M points):
    after a clean close it reads the sizes of its folders from the close's record."""
    _root, state = ingested_tree(tmp_path)
    assert _status_bytes(state) == state_dir_bytes(state)  # the close's figure: a walk's
    res = CliRunner().invoke(cli, ["status", "--state-dir", str(state), "--json"])
    assert json.loads(res.stdout)["disk"]["state_dir_bytes"] == state_dir_bytes(state)
    visits = _Visits(monkeypatch)
    entries, stats, _ = visits.during(lambda: _status_bytes(state))
    assert entries <= len(os.listdir(state))  # the state dir's own listing, no folder's
    _pad_store(state, 300)  # as many more files as a store of many more points
    assert visits.during(lambda: _status_bytes(state))[:2] == (entries, stats)


@pytest.mark.engine("edge")
def test_the_daemons_status_measures_the_folders_again_only_after_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the daemon a status poll while nothing changed lists no store file; after
    a sync that wrote, the size is measured again and equals a walk of the state dir."""
    from ingestd.daemon.commands.status import status_of

    root, state = ingested_tree(tmp_path)
    eng = make_engine(root, state, fake_vectors)
    try:
        name = next(iter(eng.context.sources))
        eng.sync(name)  # nothing changed
        visits = _Visits(monkeypatch)

        def poll() -> int:
            return int(status_of(eng.resources.manifest, eng, state)["disk"]["state_dir_bytes"])

        assert poll() == state_dir_bytes(state)  # measured: the sync wrote the manifest
        quiet = visits.during(poll)
        assert quiet[0] <= len(os.listdir(state)) and quiet[2] == state_dir_bytes(state)
        _pad_store(state, 300)
        assert visits.during(poll)[:2] == quiet[:2]  # nothing written: nothing walked
        (root / "new.md").write_text("# New\n\n" + "A page that was not there. " * 200)
        assert eng.sync(name).indexed == 1
        entries, _stats, after = visits.during(poll)
        assert entries > 300 and after == state_dir_bytes(state)  # measured again, whole
    finally:
        eng.close()
    record = read_record(state)
    assert record is not None and record.folder_bytes == folder_bytes(state)  # the close's walk


@pytest.mark.engine("edge")
def test_a_no_op_sync_carries_the_stores_size_and_does_not_walk_it(tmp_path: Path) -> None:
    """A writer that never opened the store (a no-op ``resync`` after a clean close)
    records the store's size of the last close again: opening the manifest makes its
    ``-wal``, which had made the recorded sizes look stale and the store walked."""
    root, state = ingested_tree(tmp_path)
    record = read_record(state)
    assert record is not None and record.folder_bytes["edge"] == folder_bytes(state)["edge"]
    _pad_store(state, 300)  # seen by a walk, not by a writer that carries the size
    eng = make_engine(root, state, fake_vectors)
    try:
        assert eng.sync(next(iter(eng.context.sources))).indexed == 0
        assert not eng.resources.store_open
    finally:
        eng.close()
    again = read_record(state)
    assert again is not None and again.folder_bytes["edge"] == record.folder_bytes["edge"]
    assert folder_bytes(state)["edge"] > record.folder_bytes["edge"]  # the padding is there
