"""Disk usage of a folder, as ``status`` and ``migrate --dry-run`` report it."""

from __future__ import annotations

from pathlib import Path

from ingestd.daemon.statedir import dir_bytes, state_dir_bytes


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
