"""Watching: the pure Batcher, the watchdog fallback's event bridge, and real watchers.

The first part steps :class:`Batcher` with a fake clock and feeds synthetic watchdog
events to the fallback :class:`WatchdogEmitter` (no threads, no sleeps). The second
part runs a real :class:`Service` (real inotify watcher, real engine, fake embedder) on
a temporary tree of real md-docs pages and replays the exact file-system call
sequences of folder moves, renames, ``git checkout`` and bursts; each ends with
``verify`` clean and the store equal to a from-scratch ingest (ids and payload). The
inotify watcher's own unit tests are in ``test_inotify_watcher.py``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
)

from ingestd.daemon.config import load_config
from ingestd.daemon.sources.filter import SourceFilter
from ingestd.daemon.watch.fallback import WatchdogEmitter
from ingestd.daemon.watch.watcher import Batch, Batcher, BatcherThread
from tests.daemon.harness import Harness
from tests.helpers import CountingEmbedder, copy_tree, wait_for

#: watchdog warns (on its emitter thread) when a folder that was moved out comes back in
#: with its old watch still registered; with warnings as errors that would kill the
#: emitter thread, which the real daemon never runs with.
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

#: Small real pages; two share a folder (folder moves), one is deeper.
WATCH_MD = (
    "blog/2023/php-beta-release.md",
    "blog/2023/integrations.md",
    "blog/2023/gc-candidates.md",
    "community/end-user/otel-in-practice.md",
    "blog/2026/otel-graduates.md",
)


@pytest.fixture
def small_tree(tmp_path: Path) -> Path:
    return copy_tree(tmp_path / "docs", WATCH_MD)


# -- Batcher (pure, fake clock) -------------------------------------------------------------------


def test_batcher_coalesces_a_path_until_quiet() -> None:
    b = Batcher(debounce=0.3, max_delay=5)
    b.add("s", "a.md", 10.0)
    b.add("s", "a.md", 10.1)
    b.add("s", "b.md", 10.2)
    assert b.due(10.4) == []  # 0.2 s since the last event
    assert b.depth() == 2 and b.oldest() == 10.0
    assert b.next_due() == pytest.approx(10.5)
    assert b.due(10.5) == [Batch("s", {"a.md", "b.md"}, 10.0)]
    assert b.depth() == 0 and b.oldest() is None and b.next_due() is None
    assert b.due(100.0) == []


def test_batcher_caps_delay_during_continuous_events() -> None:
    b = Batcher(debounce=3, max_delay=20)  # whole-number clock: exact arithmetic
    batches = []
    for t in range(50):  # an event every second for 50 s: never quiet
        b.add("s", f"f{t}.md", t)
        batches += b.due(t)
    assert [x.first for x in batches] == [0, 21]
    assert [len(x.paths) for x in batches] == [21, 21]
    assert b.depth() == 8 and b.oldest() == 42
    assert b.next_due() == 52  # 49 + 3 s of quiet comes before 42 + 20


def test_batcher_sources_are_independent() -> None:
    b = Batcher(debounce=1, max_delay=10)
    b.add("a", "x.md", 0)
    b.add("b", "x.md", 0.8)
    assert b.due(1.0) == [Batch("a", {"x.md"}, 0)]
    assert b.due(1.8) == [Batch("b", {"x.md"}, 0.8)]


def test_batcher_max_delay_is_never_below_debounce() -> None:
    b = Batcher(debounce=1, max_delay=0.1)
    b.add("s", "x.md", 0)
    assert b.due(0.5) == []
    assert b.due(1.0)


def test_batcher_thread_survives_a_failing_emit(no_thread_leaks: None) -> None:
    got: list[Batch] = []
    done = threading.Event()

    def emit(source: str, paths: set[str], first: float) -> None:
        if "boom.md" in paths:
            raise RuntimeError("boom")
        got.append(Batch(source, paths, first))
        done.set()

    bt = BatcherThread(Batcher(0.01, 1), emit)
    bt.start()
    try:
        bt.put("s", "boom.md")
        wait_for(lambda: bt.depth() == 0, 5, "the failing batch")
        bt.put("s", "ok.md")
        assert done.wait(5)
        assert bt.alive()
        assert [b.paths for b in got] == [{"ok.md"}]
    finally:
        bt.stop()
    assert not bt.alive()


# -- the watchdog fallback's event bridge (synthetic events) --------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.put: list[str] = []
        self.lost: list[str] = []


def _bridge(root: Path, tmp: Path) -> tuple[WatchdogEmitter, _Recorder]:
    cfg = load_config(None, roots=[root])
    rec = _Recorder()
    sw = WatchdogEmitter(
        SourceFilter(cfg.sources[0], tmp / "state"),
        lambda s, p: rec.put.append(p),
        lambda s, why: rec.lost.append(why),
    )
    return sw, rec


def test_bridge_forwards_relevant_paths_only(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    sw, rec = _bridge(root, tmp_path)
    r = os.path.realpath(root)
    events = [
        FileCreatedEvent(f"{r}/4913"),  # vim's probe
        FileDeletedEvent(f"{r}/4913"),
        FileMovedEvent(f"{r}/a.md", f"{r}/a.md~"),  # vim's backup
        FileCreatedEvent(f"{r}/a.md"),
        FileModifiedEvent(f"{r}/a.md"),
        FileClosedEvent(f"{r}/a.md"),
        FileOpenedEvent(f"{r}/b.md"),
        FileClosedNoWriteEvent(f"{r}/b.md"),
        FileCreatedEvent(f"{r}/.#a.md"),  # emacs lock
        FileCreatedEvent(f"{r}/#a.md#"),  # emacs autosave
        FileCreatedEvent(f"{r}/.a.md.swp"),
        FileCreatedEvent(f"{r}/.git/index.lock"),
        FileCreatedEvent(f"{r}/image.png"),
        FileCreatedEvent("/elsewhere/x.md"),
        DirModifiedEvent(f"{r}/sub"),
        DirCreatedEvent(f"{r}/.git/refs"),
        DirMovedEvent(f"{r}/sub", f"{r}/moved"),
        DirDeletedEvent(f"{r}/gone"),
        FileMovedEvent(f"{r}/draft.tmp", f"{r}/c.md"),  # write-temp-then-rename-over
    ]
    for ev in events:
        sw._handler.dispatch(ev)
    assert rec.put == ["a.md", "a.md", "a.md", "a.md", "sub", "moved", "gone", "c.md"]
    assert rec.lost == []


def test_bridge_gitignore_change_replans_its_folder_and_root_delete_rescans(
    tmp_path: Path,
) -> None:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    sw, rec = _bridge(root, tmp_path)
    r = os.path.realpath(root)
    sw._handler.dispatch(FileModifiedEvent(f"{r}/.gitignore"))
    sw._handler.dispatch(FileCreatedEvent(f"{r}/sub/.gitignore"))
    sw._handler.dispatch(DirDeletedEvent(r))
    assert rec.put == ["", "sub"]  # the whole root, then folder sub, in the current batch
    assert rec.lost == ["the source root was deleted"]


def test_bridge_survives_a_failing_callback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    cfg = load_config(None, roots=[root])
    lost: list[str] = []

    def put(source: str, path: str) -> None:
        raise OSError("queue is gone")

    sw = WatchdogEmitter(SourceFilter(cfg.sources[0]), put, lambda s, why: lost.append(why))
    sw._handler.dispatch(FileCreatedEvent(os.path.realpath(root / "a.md")))
    assert lost == ["an event could not be handled"]
    assert "error handling" in caplog.text


# -- the real observer on real trees --------------------------------------------------------------


def _run(root: Path, scratch: Path, embed: CountingEmbedder, **kw: object) -> Harness:
    return Harness(root, scratch / "state", embed, **kw).start()


@pytest.mark.slow
def test_file_rename_inside_tree_rekeys_without_embedding(
    small_tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    with _run(small_tree, scratch, fake_embedder) as h:
        n, b = len(fake_embedder.texts), h.service.batches_done
        os.rename(
            small_tree / "blog/2023/integrations.md", small_tree / "blog/integrations-2023.md"
        )
        h.settle(b)
        assert len(fake_embedder.texts) == n, "a rename called the embedder"
        h.assert_matches_oracle(scratch)


@pytest.mark.slow
def test_folder_rename_inside_tree_rekeys_without_embedding(
    small_tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    with _run(small_tree, scratch, fake_embedder) as h:
        n, b = len(fake_embedder.texts), h.service.batches_done
        os.rename(small_tree / "blog/2023", small_tree / "blog/archive-2023")
        h.settle(b)
        assert len(fake_embedder.texts) == n, "a folder rename called the embedder"
        moved = [p for plan in h.applied for (_, p) in plan.moves]
        assert sorted(moved) == [
            "blog/archive-2023/gc-candidates.md",
            "blog/archive-2023/integrations.md",
            "blog/archive-2023/php-beta-release.md",
        ]
        h.assert_matches_oracle(scratch)


@pytest.mark.slow
def test_case_only_rename(small_tree: Path, scratch: Path, fake_embedder: CountingEmbedder) -> None:
    with _run(small_tree, scratch, fake_embedder) as h:
        n, b = len(fake_embedder.texts), h.service.batches_done
        os.rename(
            small_tree / "blog/2026/otel-graduates.md", small_tree / "blog/2026/OTel-Graduates.md"
        )
        h.settle(b)
        b = h.service.batches_done
        os.rename(small_tree / "blog/2026", small_tree / "blog/Y2026")
        h.settle(b)
        assert len(fake_embedder.texts) == n
        paths = {p["path"] for p in h.points().values()}
        assert "blog/Y2026/OTel-Graduates.md" in paths
        assert not any(p.startswith("blog/2026/") for p in paths)
        h.assert_matches_oracle(scratch)


@pytest.mark.slow
def test_folder_moved_out_then_back_in(
    small_tree: Path, scratch: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    outside = tmp_path / "outside"
    with _run(small_tree, scratch, fake_embedder) as h:
        b = h.service.batches_done
        # inotify reports one IN_MOVED_FROM for the folder and nothing for its files
        shutil.move(str(small_tree / "blog/2023"), str(outside))
        h.settle(b)
        assert not any(p["path"].startswith("blog/2023/") for p in h.points().values())
        h.assert_matches_oracle(scratch)

        n, b = len(fake_embedder.texts), h.service.batches_done
        shutil.move(str(outside), str(small_tree / "blog/2023-back"))
        h.settle(b)
        assert len(fake_embedder.texts) == n, "texts embedded before were embedded again"
        # the moved-in folder is watched: an edit inside it is picked up
        b = h.service.batches_done
        page = small_tree / "blog/2023-back/integrations.md"
        page.write_text(page.read_text() + "\n\nA sentence added after the move.\n")
        h.settle(b)
        assert any("added after the move" in t for t in fake_embedder.texts[n:])
        h.assert_matches_oracle(scratch)


@pytest.mark.slow
def test_new_folder_tree_created_inside_is_indexed(
    small_tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    with _run(small_tree, scratch, fake_embedder) as h:
        b = h.service.batches_done
        deep = small_tree / "new/a/b"
        deep.mkdir(parents=True)
        (deep / "page.md").write_text("# Deep\n\nA page in a folder created while watching.\n")
        (small_tree / "new/top.md").write_text("# Top\n\nAnother one.\n")
        h.settle(b)
        paths = {p["path"] for p in h.points().values()}
        assert {"new/a/b/page.md", "new/top.md"} <= paths
        h.assert_matches_oracle(scratch)


@pytest.mark.slow
def test_delete_then_recreate_is_a_modification(
    small_tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    with _run(small_tree, scratch, fake_embedder) as h:
        b = h.service.batches_done
        page = small_tree / "blog/2023/gc-candidates.md"
        text = page.read_text()
        page.unlink()
        page.write_text(text + "\nRe-created with one more line.\n")
        h.settle(b)
        res = [plan for plan in h.applied if "blog/2023/gc-candidates.md" in plan.index]
        assert res and not any("blog/2023/gc-candidates.md" in plan.delete for plan in res)
        h.assert_matches_oracle(scratch)


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_checkout_between_branches(
    tmp_path: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    """A checkout is one batch, each file processed once; switching back embeds nothing."""
    repo = copy_tree(tmp_path / "repo", WATCH_MD)
    (repo / ".gitignore").write_text("ignored/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "main")
    main_head = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-b", "topic")
    (repo / "blog/2023/integrations.md").unlink()  # deleted on topic
    os.rename(repo / "blog/2023/gc-candidates.md", repo / "blog/gc.md")  # renamed on topic
    page = repo / "blog/2026/otel-graduates.md"
    page.write_text(page.read_text().replace("OpenTelemetry", "OTel", 3))  # edited on topic
    for i in range(20):  # added on topic
        (repo / f"topic/page{i}.md").parent.mkdir(exist_ok=True)
        (repo / f"topic/page{i}.md").write_text(f"# Topic page {i}\n\nOnly on the topic branch.\n")
    (repo / ".gitignore").write_text("ignored/\ndrafts/\n")  # a checkout re-plans the root
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "topic")
    topic_head = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")

    with _run(repo, scratch, fake_embedder) as h:
        assert {
            p.get("git_commit")
            for p in h.call(lambda e: dict(e.resources.store.scroll("ingestd"))).values()
        } == {main_head}
        before_plans, b = len(h.applied), h.service.batches_done
        _git(repo, "checkout", "-q", "topic")
        h.settle(b)
        indexed = h.paths_applied(before_plans)
        assert len(indexed) == len(set(indexed)), f"a file was processed twice: {indexed}"
        h.assert_matches_oracle(scratch)
        commits = {
            p.get("git_commit")
            for p in h.call(lambda e: dict(e.resources.store.scroll("ingestd"))).values()
        }
        assert topic_head in commits

        (repo / "ignored").mkdir()
        (repo / "ignored/skip.md").write_text("# Ignored by .gitignore\n")
        n, b = len(fake_embedder.texts), h.service.batches_done
        _git(repo, "checkout", "-q", "main")
        h.settle(b)
        assert fake_embedder.texts[n:] == [], "switching back to a known branch embedded text"
        assert not any(p["path"].startswith("ignored/") for p in h.points().values())
        h.assert_matches_oracle(scratch)


@pytest.mark.slow
def test_burst_of_2000_small_files(
    tmp_path: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    root = copy_tree(tmp_path / "docs", WATCH_MD[:1])
    with _run(root, scratch, fake_embedder) as h:
        b = h.service.batches_done
        for d in range(20):
            folder = root / f"burst/d{d:02d}"
            folder.mkdir(parents=True)
            for i in range(100):
                (folder / f"n{i:03d}.md").write_text(
                    f"# Note {d}-{i}\n\nSmall file {d * 100 + i}.\n"
                )
        h.settle(b, timeout=120)
        indexed = h.paths_applied()
        burst = [p for p in indexed if p.startswith("burst/")]
        assert len(burst) == len(set(burst)) == 2000, "each file must be processed exactly once"
        assert len({p["path"] for p in h.points().values()}) == 2001
        h.assert_matches_oracle(scratch)


@pytest.mark.slow
def test_dead_watcher_makes_the_daemon_exit_nonzero(
    small_tree: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = _run(small_tree, scratch, fake_embedder)
    (watcher,) = h.service.watches.watchers
    assert watcher.backend == "inotify"

    def broken() -> list[object]:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(watcher.emitter._kernel, "read", broken)  # the reader crashes
    (small_tree / "blog/trigger.md").write_text("# Trigger\n\nAn event to read.\n")
    wait_for(lambda: not h.alive, 10, "the service to exit")
    assert h.code == 1
    assert "the watcher of source" in caplog.text and "stopped" in caplog.text
    assert "file watching stopped" in caplog.text


@pytest.mark.slow
def test_symlinks_are_not_followed_and_loops_do_not_hang(
    small_tree: Path,
    tmp_path: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    no_thread_leaks: None,
) -> None:
    outside = copy_tree(tmp_path / "outside", WATCH_MD[:1])
    os.symlink("..", small_tree / "blog/loop")  # a loop back to the root
    os.symlink(outside, small_tree / "linked-outside")  # a folder outside the root
    os.symlink(small_tree / WATCH_MD[1], small_tree / "alias.md")  # a symlinked document
    with _run(small_tree, scratch, fake_embedder) as h:
        paths = {p["path"] for p in h.points().values()}
        assert paths == set(WATCH_MD)
        b = h.service.batches_done
        (outside / "blog/2023/extra.md").write_text("# Outside\n\nNever indexed.\n")
        (small_tree / "blog/inside.md").write_text("# Inside\n\nIndexed.\n")
        h.settle(b)
        paths = {p["path"] for p in h.points().values()}
        assert paths == {*WATCH_MD, "blog/inside.md"}
        h.assert_matches_oracle(scratch)


@pytest.mark.slow
def test_deleted_root_keeps_the_daemon_and_the_points(
    small_tree: Path,
    tmp_path: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unmounted or deleted root is waited for; it never deletes every document."""
    with _run(small_tree, scratch, fake_embedder, watch={"unwatched_rescan_s": 0.2}) as h:
        before = set(h.points())
        away = tmp_path / "unmounted"
        shutil.move(str(small_tree), str(away))
        wait_for(lambda: h.service.watches.unwatched, 10, "the source to be unwatched")
        assert h.alive and set(h.points()) == before
        shutil.move(str(away), str(small_tree))
        wait_for(lambda: not h.service.watches.unwatched, 10, "watching to resume")
        b = h.service.batches_done
        (small_tree / "back.md").write_text("# Back\n\nThe volume is mounted again.\n")
        h.settle(b)
        assert "back.md" in {p["path"] for p in h.points().values()}
        h.assert_matches_oracle(scratch)


# -- the fallback backends, run for real ----------------------------------------------------------


def test_backend_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from ingestd.daemon.watch.watcher import BACKEND_ENV, default_backend

    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert default_backend() == "inotify"
    monkeypatch.setenv(BACKEND_ENV, " Polling ")
    assert default_backend() == "polling"
    monkeypatch.setenv(BACKEND_ENV, "fsevents")
    with pytest.raises(ValueError, match="INGESTD_WATCH_BACKEND='fsevents': use one of"):
        default_backend()


def test_run_refuses_an_unknown_backend(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ingestd.daemon.cli.main import cli

    (tmp_path / "docs").mkdir()
    res = CliRunner().invoke(
        cli,
        ["run", "--state-dir", str(tmp_path / "state"), str(tmp_path / "docs")],
        env={"INGESTD_WATCH_BACKEND": "bogus"},
    )
    logging.getLogger("ingestd").propagate = True  # the CLI's set-up turned it off
    assert res.exit_code == 2, res.output
    assert "INGESTD_WATCH_BACKEND='bogus': use one of inotify, watchdog, polling" in res.output


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["polling", "watchdog"])
def test_fallback_backends_follow_changes(
    small_tree: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    """watchdog's polling observer (pruned like a scan) and its platform observer."""
    monkeypatch.setenv("INGESTD_WATCH_BACKEND", backend)
    (small_tree / "node_modules/pkg").mkdir(parents=True)
    with _run(small_tree, scratch, fake_embedder) as h:
        (w,) = h.service.watches.watchers
        assert w.backend == backend
        st = h.service.status()
        assert st["sources"][0]["watch_backend"] == backend and st["daemon"]["healthy"]
        b = h.service.batches_done
        (small_tree / "new/deep").mkdir(parents=True)
        (small_tree / "new/deep/page.md").write_text("# New\n\nIn a new folder.\n")
        (small_tree / "node_modules/pkg/readme.md").write_text("# Not ours\n")
        os.rename(small_tree / "blog/2023", small_tree / "blog/y2023")
        h.settle(b, timeout=60)
        paths = {p["path"] for p in h.points().values()}
        assert "new/deep/page.md" in paths and "blog/y2023/integrations.md" in paths
        assert not any(p.startswith("node_modules/") for p in paths)
        h.assert_matches_oracle(scratch)
