"""Folders whose entries cannot be read, and roots that are system trees.

The bug this pins: ``ingestd resync /proc/1`` crashed with ``PermissionError`` (exit
3): the walk caught errors *opening* a folder, not errors *reading its entries*
(``os.scandir`` yields entries lazily; ``/proc/1/map_files`` fails mid-way). Both are
now one case: the folder is listed as skipped and, since its files cannot be seen,
nothing the manifest knows below it is deleted. A root of ``/`` or inside a system
tree is refused by the config check.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.config import ConfigError, SourceConfig, load_config
from ingestd.daemon.sources import walk as scanner
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.sources.walk import scan
from tests.helpers import CountingEmbedder, make_engine, run_cli


class _BrokenDir:
    """An ``os.scandir`` iterator that yields ``good`` entries, then fails like ``/proc``."""

    def __init__(self, inner: Any, good: int) -> None:
        self.inner = inner
        self.good = good

    def __enter__(self) -> _BrokenDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.close()

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self.good <= 0:
            raise PermissionError(errno.EACCES, "Permission denied")
        self.good -= 1
        return next(self.inner)


def _break(monkeypatch: pytest.MonkeyPatch, folder: Path, good: int = 0) -> None:
    real = os.scandir

    def scandir(path: Any) -> Any:
        it = real(path)
        if isinstance(path, int):  # a folder opened beneath the root: its descriptor
            path = os.readlink(f"/proc/self/fd/{path}")
        return _BrokenDir(it, good) if Path(path) == folder else it

    monkeypatch.setattr(scanner.os, "scandir", scandir)


def test_errors_reading_entries_skip_the_folder(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _break(monkeypatch, docs / "docs/collector")
    found = scan(SourceFilter(SourceConfig(root=docs)))
    assert set(found) == {"good.md", "docs/concepts/glossary.md"}
    assert found.unreadable == {"docs/collector": "Permission denied"}
    assert found.covers("docs/collector/deploy/gateway.md")
    assert not found.covers("docs/concepts/glossary.md")


@pytest.mark.skipif(not Path("/proc/1/map_files").exists(), reason="needs Linux /proc")
def test_scanning_proc_does_not_crash() -> None:
    """The reported case, for real: /proc/1 has folders whose entries cannot be read."""
    found = scan(SourceFilter(SourceConfig(root=Path("/proc/1"), include=("**/*",))))
    assert found  # readable files were found, and the walk ended


def test_documents_in_an_unreadable_folder_are_kept_not_deleted(
    docs: Path, tmp_path: Path, fake_embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = make_engine(docs, tmp_path / "state", fake_embedder)
    (name,) = eng.context.sources
    assert eng.sync(name).indexed == 3
    _break(monkeypatch, docs / "docs/collector", good=1)  # fails mid-way
    res = eng.sync(name)
    assert (res.deleted, res.held) == (0, [])
    assert "docs/collector/deploy/gateway.md" in eng.resources.manifest.documents(name)
    (entry,) = eng.failures.skipped_entries(name)
    assert entry["path"] == "docs/collector/"
    assert entry["reason"].startswith("folder cannot be read (Permission denied)")
    res = eng.sync(name, ["docs/collector"])  # a live batch on that folder: the same
    assert res.deleted == 0
    monkeypatch.undo()
    assert eng.sync(name).deleted == 0
    assert eng.failures.skipped_entries(name) == []
    assert eng.verify(name).clean
    eng.close()


@pytest.mark.parametrize(
    ("root", "problem"),
    [
        ("/", "/ is the whole file system"),
        ("/proc/1", "/proc/1 is in the system tree /proc"),
        ("/sys", "/sys is in the system tree /sys"),
        ("/etc", "/etc is in the system tree /etc"),
        ("/usr", "/usr is a system tree of programs"),
    ],
)
def test_system_roots_are_refused(root: str, problem: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(None, roots=[root])
    assert str(exc.value).startswith(f"PATH {root}: {problem}")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"sources:\n  - {{name: a, root: {tmp_path}}}\n  - {{name: b, root: {root}}}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert str(exc.value).startswith(f"sources[1].root: {problem}")


def test_folders_below_program_trees_are_allowed(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        d = Path(os.path.realpath(shm)) / f"ingestd-test-{os.getpid()}"
        d.mkdir(exist_ok=True)
        try:
            assert load_config(None, roots=[d]).sources[0].root == d
        finally:
            d.rmdir()
    if Path("/usr/share").is_dir():
        assert load_config(None, roots=["/usr/share"]).sources[0].root == Path("/usr/share")


@pytest.mark.slow
def test_resync_of_a_system_root_exits_2_with_one_line(tmp_path: Path) -> None:
    res = run_cli("resync", "--state-dir", str(tmp_path / "state"), "/proc/1", timeout=120)
    assert res.returncode == 2, res.stderr
    assert "PATH /proc/1: /proc/1 is in the system tree /proc" in res.stderr
    assert "Traceback" not in res.stderr
