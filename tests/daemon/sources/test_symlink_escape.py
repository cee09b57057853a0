"""Nothing outside a source's root is ever read, whatever link replaces a file or folder.

The attack: an indexed file, or an indexed folder, is replaced by a symbolic link to a
place outside every root that holds a file of the same name (anyone who can commit a
link into a watched checkout can do it). Before, ``read`` followed the link and served
the outside file's lines, and a scan kept the old chunks of a folder that had become a
link. Now every read, stat and walk opens each part of the path beneath the root
without following a link (:mod:`ingestd.daemon.sources.beneath`): the link holds no
document, its old chunks are deleted, and ``read`` never returns the outside text,
with or without a daemon, by path and by id.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.commands.query import read
from ingestd.daemon.sources.beneath import (
    OutsideRootError,
    open_beneath,
    read_beneath,
    stat_beneath,
)
from ingestd.daemon.sources.walk import walk_folders
from ingestd.daemon.wire.errors import DaemonError
from tests.daemon.harness import Harness
from tests.helpers import CountingEmbedder, fake_vectors, make_engine, wait_for

SECRET = "TOP-SECRET-LINE of a file outside every root"


def _tree(tmp: Path) -> tuple[Path, Path]:
    """A docs tree (a file at the top, a folder of two) and an outside folder mirroring it."""
    root = tmp / "docs"
    (root / "guide").mkdir(parents=True)
    (root / "index.md").write_text("# Index\n\nThe welcome page of the docs.\n")
    (root / "guide" / "install.md").write_text("# Install\n\nRun the installer twice.\n")
    (root / "guide" / "usage.md").write_text("# Usage\n\nStart it, then stop it.\n")
    outside = tmp / "outside"
    (outside / "guide").mkdir(parents=True)
    for rel in ("index.md", "guide/install.md", "guide/usage.md"):
        (outside / rel).write_text(f"# Not yours\n\n{SECRET}\n")
    return root, outside


def _swap_file(root: Path, outside: Path) -> None:
    (root / "index.md").unlink()
    (root / "index.md").symlink_to(outside / "index.md")


def _swap_folder(root: Path, outside: Path) -> None:
    for f in (root / "guide").iterdir():
        f.unlink()
    (root / "guide").rmdir()
    (root / "guide").symlink_to(outside / "guide", target_is_directory=True)


def _served(result: dict[str, Any]) -> str:
    lines = result.get("lines") or {}
    return str(lines.get("text", "")) + "".join(str(c.get("text", "")) for c in result["chunks"])


def test_reads_beneath_a_root_follow_no_link(tmp_path: Path) -> None:
    root, outside = _tree(tmp_path)
    assert read_beneath(root, "guide/usage.md").startswith(b"# Usage")
    _swap_file(root, outside)
    _swap_folder(root, outside)
    for rel in ("index.md", "guide/usage.md", "guide"):
        with pytest.raises(OutsideRootError):
            read_beneath(root, rel)
    for rel in ("index.md", "guide"):  # the link itself, as lstat gives it
        st = stat_beneath(root, rel)
        assert st is not None and stat.S_ISLNK(st.st_mode)
    assert stat_beneath(root, "guide/usage.md") is None  # under a link: not there
    for bad in ("../outside/index.md", "/etc/passwd", "guide/../index.md", ""):
        with pytest.raises(OutsideRootError):
            open_beneath(root, bad)
    (root / "fifo.md").unlink(missing_ok=True)
    os.mkfifo(root / "fifo.md")
    with pytest.raises(FileNotFoundError, match="not a regular file"):
        read_beneath(root, "fifo.md")  # and it did not block
    assert [rel for rel, _ in walk_folders(_filter(root))] == [""]


def _filter(root: Path) -> Any:
    from ingestd.daemon.config import SourceConfig
    from ingestd.daemon.sources.filter import SourceFilter

    return SourceFilter(SourceConfig(name="docs", root=root))


@pytest.mark.parametrize("swap", [_swap_file, _swap_folder], ids=["file", "folder"])
def test_without_a_daemon_a_link_out_of_the_root_is_never_read(tmp_path: Path, swap: Any) -> None:
    root, outside = _tree(tmp_path)
    state = tmp_path / "state"
    eng = make_engine(root, state, fake_vectors)
    try:
        (name,) = eng.context.sources
        eng.sync(name)
        paths = ("index.md",) if swap is _swap_file else ("guide/install.md", "guide/usage.md")
        hits = {p: eng.resources.manifest.document(name, p) for p in paths}
        ids = {p: [c.point_id for c in eng.resources.manifest.chunks(hits[p].id)] for p in paths}
        swap(root, outside)
        # read by path and by id before any sync: the indexed chunks, never the file outside
        for p in paths:
            by_path = read.read(eng, path=p)
            assert SECRET not in _served(by_path) and by_path["lines"] is None
            by_id = read.read(eng, id=ids[p][0])
            assert SECRET not in _served(by_id) and by_id["lines"] is None
        # a scan drops what became a link, and verify is clean after it
        res = eng.sync(name)
        assert res.deleted == len(paths)
        for p in paths:
            assert eng.resources.manifest.document(name, p) is None
            with pytest.raises(DaemonError, match="not an indexed document"):
                read.read(eng, path=p)
        assert eng.verify(name).clean
        assert not any(SECRET in str(p) for _, p in eng.resources.store.scroll("ingestd"))
    finally:
        eng.close()


@pytest.mark.parametrize("swap", [_swap_file, _swap_folder], ids=["file", "folder"])
def test_a_running_daemon_drops_a_link_out_of_the_root(tmp_path: Path, swap: Any) -> None:
    root, outside = _tree(tmp_path)
    with Harness(root, tmp_path / "state", CountingEmbedder(fake_vectors)) as h:
        paths = ("index.md",) if swap is _swap_file else ("guide/install.md", "guide/usage.md")
        before = h.service.batches_done
        swap(root, outside)
        wait_for(
            lambda: not ({p["path"] for p in h.points().values()} & set(paths)),
            30,
            "the chunks of what became a link to be deleted",
        )
        h.settle(before)
        for p in paths:
            with pytest.raises(DaemonError, match="not an indexed document"):
                h.call(lambda e, p=p: read.read(e, path=p))
        assert not any(SECRET in str(p) for p in h.points().values())
