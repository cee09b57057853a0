"""ingestd's inotify watcher on real temporary trees: which folders are watched, and when.

Each test starts an :class:`InotifyEmitter` on a small tree, acts with plain ``os``
calls, and waits (with a deadline, never a fixed sleep) for the paths it reports. To
show that something queued *no* event, a marker file is written afterwards: the
kernel delivers events in order, so once the marker's event is in, anything before it
would be too. The watched set is compared with the kernel's own list of watches
(``/proc/self/fdinfo``) after every step. The watch limit (``ENOSPC``) is reached for
real inside a user namespace of its own; ``EACCES`` as an unprivileged user.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingestd.daemon.config import load_config
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.watch.emitter import InotifyEmitter
from ingestd.daemon.watch.folders import DIR_MASK, OVERFLOW, ROOT_GONE, ROOT_MASK
from ingestd.daemon.watch.inotify import (
    IN_ACCESS,
    IN_CLOSE_NOWRITE,
    IN_MODIFY,
    IN_OPEN,
    available,
    fdinfo_inodes,
    parse_events,
)
from ingestd.daemon.watch.paths import PathIndex
from tests.helpers import wait_for

pytestmark = pytest.mark.skipif(not available(), reason="needs Linux inotify")

REPO = Path(__file__).resolve().parents[3]


class Recorder:
    """Collects ``put`` paths and ``on_lost`` reasons from the reader thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.paths: list[str] = []
        self.lost: list[str] = []

    def put(self, source: str, path: str) -> None:
        with self.lock:
            self.paths.append(path)

    def on_lost(self, source: str, why: str) -> None:
        with self.lock:
            self.lost.append(why)

    def take(self) -> list[str]:
        with self.lock:
            out, self.paths = self.paths, []
            return out

    def wait(self, path: str, timeout: float = 5) -> list[str]:
        """Wait until ``path`` was put; returns (and forgets) everything put so far."""
        wait_for(lambda: path in list(self.paths), timeout, f"an event for {path}", 0.01)
        return self.take()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "docs"
    for d in ("guide/a", "api", "node_modules/pkg/lib", ".venv/lib/site", ".git/objects"):
        (r / d).mkdir(parents=True)
    (r / "guide/intro.md").write_text("# Intro\n")
    (r / "node_modules/pkg/readme.md").write_text("# Not a doc of ours\n")
    (r / ".gitignore").write_text("build/\n")
    (r / "build/html").mkdir(parents=True)
    return r


def _start(
    root: Path, rec: Recorder, state: Path | None = None, **source: object
) -> InotifyEmitter:
    cfg = load_config(None, roots=[root])
    src = cfg.sources[0].model_copy(update=source) if source else cfg.sources[0]
    em = InotifyEmitter(SourceFilter(src, state), rec.put, rec.on_lost)
    em.start()
    return em


@pytest.fixture
def watch(root: Path, tmp_path: Path) -> Iterator[tuple[InotifyEmitter, Recorder]]:
    rec = Recorder()
    em = _start(root, rec, tmp_path / "state")
    try:
        yield em, rec
    finally:
        em.stop()


def _kernel_watches(em: InotifyEmitter) -> set[int]:
    assert em._kernel is not None
    inodes = fdinfo_inodes(em._kernel.fd)
    assert inodes is not None
    return inodes


def assert_consistent(em: InotifyEmitter, root: Path) -> None:
    """The watcher's folders are exactly the kernel's watches, by inode."""
    mine = {os.lstat(root / rel if rel else root).st_ino for rel in em.watched_folders()}
    assert mine == _kernel_watches(em)


def marker(root: Path, rec: Recorder, name: str = "marker.md") -> list[str]:
    """Write a document at the root and wait for both of its events (``IN_CREATE``,
    ``IN_CLOSE_WRITE``): everything queued before them is in. Returns what was put."""
    (root / name).write_text("# Marker\n")
    wait_for(lambda: list(rec.paths).count(name) == 2, 5, f"the events of {name}", 0.01)
    return rec.take()


# -- pure parts ------------------------------------------------------------------------------------


def test_masks_hold_only_what_changes_the_index() -> None:
    for noise in (IN_OPEN, IN_ACCESS, IN_CLOSE_NOWRITE, IN_MODIFY):
        assert not DIR_MASK & noise and not ROOT_MASK & noise
    assert (DIR_MASK, ROOT_MASK) == (0x070003C8, 0x07000FC8)


def test_parse_events_splits_padded_names() -> None:
    import struct

    buf = struct.pack("iIII", 1, 0x100, 0, 16) + b"a.md".ljust(16, b"\0")
    buf += struct.pack("iIII", -1, 0x4000, 0, 0)
    assert [(e.wd, e.mask, e.name) for e in parse_events(buf)] == [
        (1, 0x100, b"a.md"),
        (-1, 0x4000, b""),
    ]


def test_path_index_finds_everything_below_a_folder() -> None:
    idx: PathIndex[int] = PathIndex()
    for i, key in enumerate(["a", "a/b", "a/b/c", "a-b", "a0", "ab", "b", "a/z"]):
        idx[key] = i
    assert idx.under("a") == ["a", "a/b", "a/b/c", "a/z"]
    assert idx.under("a/b") == ["a/b", "a/b/c"]
    assert len(idx.under("")) == 8
    idx.move("a/b", "x/y")
    assert idx.under("x") == ["x/y", "x/y/c"] and idx.get("x/y/c") == 2
    idx.drop("a")
    assert sorted(k for k, _ in idx.items()) == ["a-b", "a0", "ab", "b", "x/y", "x/y/c"]


# -- the watched set -------------------------------------------------------------------------------


def test_only_folders_that_can_hold_documents_are_watched(
    watch: tuple[InotifyEmitter, Recorder], root: Path
) -> None:
    em, _ = watch
    assert em.watched_folders() == ["", "api", "guide", "guide/a"]
    st = em.stats()
    # .git, node_modules, .venv, build (gitignored); nothing below them is entered
    assert (st.watched, st.ignored, st.unwatchable) == (4, 4, 0)
    assert_consistent(em, root)
    assert em.unwatched_folders() == {}


def test_reading_the_tree_queues_nothing(
    watch: tuple[InotifyEmitter, Recorder], root: Path
) -> None:
    em, rec = watch
    before = em.stats().events
    for dirpath, _, files in os.walk(root):  # what a scan, `git status` or a build does
        for f in files:
            (Path(dirpath) / f).read_bytes()
    assert subprocess.run(["ls", "-laR", str(root)], capture_output=True).returncode == 0
    assert marker(root, rec) == ["marker.md", "marker.md"]  # IN_CREATE, IN_CLOSE_WRITE
    assert em.stats().events - before == 2


def test_ignored_folders_queue_nothing(watch: tuple[InotifyEmitter, Recorder], root: Path) -> None:
    em, rec = watch
    before = em.stats().events
    for i in range(200):
        (root / f"node_modules/pkg/f{i}.md").write_text("x")
        (root / f".venv/lib/site/m{i}.py").write_text("x")
    os.makedirs(root / "node_modules/new/deep")
    (root / "build/html/page.md").write_text("# built\n")
    assert marker(root, rec) == ["marker.md", "marker.md"]
    assert em.stats().events - before == 2


def test_new_folder_is_watched_before_it_is_listed(
    watch: tuple[InotifyEmitter, Recorder], root: Path
) -> None:
    """``mkdir -p`` then a write at once: the file is in an event or under a folder put."""
    em, rec = watch
    made = []
    for i in range(30):
        deep = root / f"new{i}/a/b"
        deep.mkdir(parents=True)
        (deep / "page.md").write_text("# Deep\n")
        made.append(f"new{i}/a/b/page.md")
    put = set(marker(root, rec))
    for i, f in enumerate(made):
        parts = f.split("/")
        assert any("/".join(parts[:k]) in put for k in range(1, len(parts) + 1)), f
        assert f"new{i}/a/b" in em.watched_folders()
    assert_consistent(em, root)
    (root / "new7/a/b/later.md").write_text("# Later\n")
    rec.wait("new7/a/b/later.md")


def test_moves_within_out_and_in(
    watch: tuple[InotifyEmitter, Recorder], root: Path, tmp_path: Path
) -> None:
    em, rec = watch
    (root / "guide/a/deep").mkdir()
    rec.wait("guide/a/deep")
    # within: the watches follow the inodes, under their new paths
    os.rename(root / "guide", root / "manual")
    assert {"guide", "manual"} <= set(rec.wait("manual"))
    assert em.watched_folders() == ["", "api", "manual", "manual/a", "manual/a/deep"]
    (root / "manual/a/deep/x.md").write_text("x")
    rec.wait("manual/a/deep/x.md")
    # out: no ghost watches keep reporting from outside
    outside = tmp_path / "outside"
    shutil.move(str(root / "manual"), str(outside))
    rec.wait("manual")
    # moved out: dropped once no IN_MOVED_TO followed within MOVE_GRACE_S
    wait_for(lambda: em.watched_folders() == ["", "api"], 5, "the watches to be removed")
    assert_consistent(em, root)
    (outside / "a/deep/ghost.md").write_text("x")
    assert "ghost.md" not in " ".join(marker(root, rec, "m2.md"))
    # in: watched again, subfolders too
    shutil.move(str(outside), str(root / "back"))
    rec.wait("back")
    (root / "back/a/deep/y.md").write_text("y")
    rec.wait("back/a/deep/y.md")
    assert_consistent(em, root)


def test_moves_into_and_out_of_ignored_folders(
    watch: tuple[InotifyEmitter, Recorder], root: Path
) -> None:
    em, rec = watch
    os.rename(root / "guide", root / "node_modules/guide")  # as if moved out
    rec.wait("guide")
    wait_for(lambda: em.watched_folders() == ["", "api"], 5, "the watches to be removed")
    os.rename(root / "node_modules/pkg", root / "pkg")  # as if moved in
    rec.wait("pkg")
    assert "pkg/lib" in em.watched_folders()
    assert_consistent(em, root)


def test_deleted_folders_leave_no_watch(watch: tuple[InotifyEmitter, Recorder], root: Path) -> None:
    em, rec = watch
    for i in range(5):
        (root / f"api/v{i}/x").mkdir(parents=True)
    marker(root, rec)
    shutil.rmtree(root / "api")
    rec.wait("api")
    marker(root, rec, "m2.md")
    assert em.watched_folders() == ["", "guide", "guide/a"]
    assert_consistent(em, root)


def test_gitignore_change_adds_and_drops_watches(
    watch: tuple[InotifyEmitter, Recorder], root: Path
) -> None:
    em, rec = watch
    (root / ".gitignore").write_text("api/\n")  # build/ is un-ignored, api/ ignored
    assert "" in rec.wait("")  # the root is re-planned: build/ is scanned
    assert em.watched_folders() == ["", "build", "build/html", "guide", "guide/a"]
    assert em.stats().ignored == 4
    assert_consistent(em, root)
    (root / "api/new.md").write_text("x")
    (root / "build/html/new.md").write_text("x")
    rec.wait("build/html/new.md")
    assert "api/new.md" not in rec.take()
    (root / ".gitignore").unlink()
    rec.wait("")
    assert "api" in em.watched_folders() and "build" in em.watched_folders()


def test_excluded_folders_and_the_state_dir_are_not_watched(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    for d in ("keep", "drafts/old", "state/qdrant"):
        (root / d).mkdir(parents=True)
    rec = Recorder()
    em = _start(root, rec, root / "state", exclude=["drafts/"])
    try:
        assert em.watched_folders() == ["", "keep"]
        assert em.stats().ignored == 2
    finally:
        em.stop()


def test_an_overflow_costs_one_refresh_and_one_on_lost(
    watch: tuple[InotifyEmitter, Recorder], root: Path
) -> None:
    em, rec = watch
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    with em.gate:  # the reader is stalled: the queue fills up
        for i in range(limit // 3 + 100):
            p = root / f"api/f{i}.txt"
            p.write_bytes(b"x")
            p.unlink()
        os.rename(root / "guide", root / "handbook")  # lost: the refresh must find it
    wait_for(lambda: rec.lost, 10, "on_lost")
    assert rec.lost == [OVERFLOW]
    marker(root, rec)
    assert rec.lost == [OVERFLOW] and em._folders is not None and em._folders.overflows == 1
    assert em.watched_folders() == ["", "api", "handbook", "handbook/a"]
    assert_consistent(em, root)
    (root / "handbook/a/after.md").write_text("x")
    rec.wait("handbook/a/after.md")


def test_deleted_root_is_reported_once(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    rec = Recorder()
    em = _start(root, rec)
    try:
        shutil.rmtree(root)
        wait_for(lambda: rec.lost, 5, "on_lost")
        root.mkdir()
        (root / "late.md").write_text("x")  # a new folder: not this watch's
        wait_for(lambda: em.stats().events >= 3, 5, "the last events")
        assert rec.lost == [ROOT_GONE]
    finally:
        em.stop()


# -- limits: ENOSPC in a user namespace, EACCES as nobody ------------------------------------------

_PROBE = """
import json, os, sys
from ingestd.daemon.config import load_config
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.watch import inotify
from ingestd.daemon.watch.emitter import InotifyEmitter
root, limit = sys.argv[1], sys.argv[2]
if limit != "-":
    with open("/proc/sys/user/max_inotify_watches", "w") as f:
        f.write(limit)
cfg = load_config(None, roots=[root])
em = InotifyEmitter(SourceFilter(cfg.sources[0]), lambda s, p: None, lambda s, w: None)
inotify.libc()
if len(sys.argv) > 3:  # everything is imported: the interpreter's files may be private
    os.setgid(65534)
    os.setuid(65534)
try:
    em.start()
except OSError as exc:
    print(json.dumps({"errno": exc.errno}))
    sys.exit(0)
st = em.stats()
print(json.dumps({"watched": st.watched, "unwatchable": st.unwatchable,
                  "unwatched": em.unwatched_folders()}))
em.stop()
"""


def _probe(*args: str, prefix: tuple[str, ...] = ()) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [*prefix, sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot run the probe: {proc.stderr.strip().splitlines()[-1:]}")
    out: dict[str, object] = json.loads(proc.stdout)
    return out


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_watch_limit_reached_for_real(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    for i in range(12):
        (root / f"d{i:02d}/sub").mkdir(parents=True)
    userns = ("unshare", "--user", "--map-root-user")
    got = _probe(str(root), "10", prefix=userns)
    assert got["watched"] == 10 and got["unwatchable"] == 25 - 10
    unwatched = got["unwatched"]
    assert isinstance(unwatched, dict) and len(unwatched) == 15
    assert all(r.startswith("the inotify watch limit is reached") for r in unwatched.values())
    assert _probe(str(root), "0", prefix=userns) == {"errno": errno.ENOSPC}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_unreadable_folder_is_reported() -> None:
    base = Path(tempfile.mkdtemp(prefix="ingestd-eacces-", dir="/tmp"))
    try:
        base.chmod(0o755)
        root = base / "docs"
        (root / "open/sub").mkdir(parents=True)
        (root / "locked/inner").mkdir(parents=True)
        for d in (root, root / "open", root / "open/sub"):
            d.chmod(0o755)
        (root / "locked").chmod(0o700)
        got = _probe(str(root), "-", "as-nobody")
        assert got["watched"] == 3
        assert got["unwatched"] == {"locked": "permission denied"}
    finally:
        shutil.rmtree(base, ignore_errors=True)
