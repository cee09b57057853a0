"""Disk usage of a folder, as ``status`` and ``migrate --dry-run`` report it."""

from __future__ import annotations

from pathlib import Path

from ingestd.daemon.statedir import dir_bytes


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
