"""The service loop: reload, stop, retries, lost events, unwatched sources, status.

A real :class:`Service` runs in a thread (real watcher, real engine, fake embedder);
``request_reload()`` and ``request_exit()`` are what the SIGHUP and SIGTERM handlers
do (the signal path itself is covered by ``test_systemd.py``, which runs the process).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.commands.routes import Priority
from ingestd.daemon.service import jobs as jobs_mod
from ingestd.daemon.service import watches as watches_mod
from ingestd.daemon.wire.protocol import request
from tests.daemon.harness import FAST_WATCH, Harness
from tests.helpers import CountingEmbedder, copy_tree, fake_vectors, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning"),
]

PAGES = (
    "blog/2023/php-beta-release.md",
    "blog/2023/integrations.md",
    "community/end-user/otel-in-practice.md",
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = copy_tree(tmp_path / "docs", PAGES)
    (root / "notes.txt").write_text("Exporters send telemetry to a backend. " * 40)
    (root / "more.txt").write_text("Receivers accept telemetry from applications. " * 40)
    return root


def _config(path: Path, root: Path, txt_tokens: int, extra: str = "") -> Path:
    path.write_text(
        f"""\
sources:
  - name: docs
    root: {root}
rules:
  - name: md
    match: ["*.md"]
    chunker: markdown
  - name: notes
    match: ["notes.txt"]
    chunker: token
    params: {{max_tokens: {txt_tokens}, overlap: 8}}
  - name: text
    match: ["*.txt"]
    chunker: sentence
watch:
  debounce_ms: 150
  max_delay_ms: 3000
  rescan_interval_s: 0
{extra}"""
    )
    return path


def test_reload_rechunks_only_the_documents_of_a_changed_rule(
    tree: Path,
    tmp_path: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    no_thread_leaks: None,
) -> None:
    cfg = _config(tmp_path / "config.yaml", tree, 64)
    with Harness(tree, scratch / "state", fake_embedder, config_path=cfg) as h:
        old_engine, p = h.service.engine, len(h.applied)
        _config(cfg, tree, 40)
        h.service.request_reload()
        wait_for(lambda: h.service.reloads == 1, 20, "the reload")
        assert h.service.engine is not old_engine
        h.wait_idle()
        assert h.paths_applied(p) == ["notes.txt"]
        assert h.verify().clean
        # the reloaded daemon still watches
        b = h.service.batches_done
        (tree / "blog/new.md").write_text("# New\n\nWritten after the reload.\n")
        h.settle(b)
        # the replaced engine recorded no clean close: the new one writes on
        assert not (scratch / "state" / "clean-close.json").exists()
        assert h.call(lambda e: e.resources.proven("ingestd"))  # it knows what the old proved
    assert (scratch / "state" / "clean-close.json").is_file()  # its own stop was clean


def test_invalid_config_on_reload_keeps_the_running_one(
    tree: Path,
    tmp_path: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = _config(tmp_path / "config.yaml", tree, 64)
    with Harness(tree, scratch / "state", fake_embedder, config_path=cfg) as h:
        engine = h.service.engine
        for bad, why in [
            ("sources: [\n", "invalid YAML"),
            (_config(tmp_path / "b.yaml", tree, -1).read_text(), "max_tokens must be > 0"),
            (_config(tmp_path / "c.yaml", tree, 64, "colour: blue\n").read_text(), "colour"),
        ]:
            cfg.write_text(bad)
            caplog.clear()
            h.service.request_reload()
            wait_for(lambda: "reload failed" in caplog.text, 20, "the reload to be refused")
            assert why in caplog.text
            assert h.service.engine is engine and h.alive
        # and it still works
        b = h.service.batches_done
        (tree / "blog/still.md").write_text("# Still\n\nWatching with the old config.\n")
        h.settle(b)


def test_stop_finishes_the_batch_in_flight_and_exits_zero(
    tmp_path: Path, scratch: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "seed.md").write_text("# Seed\n\nOne page.\n")
    calls: list[int] = []

    def slow(texts: Any) -> Any:  # ~50 ms per call: a long reconcile
        calls.append(len(texts))
        time.sleep(0.05)
        return fake_vectors(texts)

    embed = CountingEmbedder(slow)
    h = Harness(root, scratch / "state", embed).start()
    b = h.service.batches_done
    for i in range(400):
        (root / f"p{i:03d}.md").write_text(f"# Page {i}\n\nText of page {i}.\n")
    wait_for(lambda: len(calls) >= 3, 30, "indexing to be under way")
    t0 = time.monotonic()
    assert h.stop(timeout=20) == 0
    assert time.monotonic() - t0 < 10, "SIGTERM must exit within a bounded time"
    assert h.service.batches_done >= b
    # what was written is consistent: a new daemon finishes the job and verifies clean
    with Harness(root, scratch / "state", CountingEmbedder(fake_vectors)) as h2:
        assert h2.verify().clean
        h2.assert_matches_oracle(scratch)


def _max_queued_events() -> int:
    try:
        return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    except (OSError, ValueError):
        return 16384


def test_an_overflow_costs_one_rescan_and_the_rescan_queues_nothing(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """A real IN_Q_OVERFLOW: the reader is stalled while more events than
    ``fs.inotify.max_queued_events`` are made; the file made last is in no event."""
    caplog.set_level(logging.WARNING)
    with Harness(tree, scratch / "state", fake_embedder) as h:
        (watcher,) = h.service.watches.watchers
        if watcher.backend != "inotify":
            pytest.skip("needs inotify")
        emitter = watcher.emitter
        n = _max_queued_events() // 3 + 200  # each file: IN_CREATE, IN_CLOSE_WRITE, IN_DELETE
        with emitter.gate:  # the reader is stalled: the kernel queue fills up
            for i in range(n):
                junk = tree / f"blog/junk{i}.png"
                junk.write_bytes(b"x")
                junk.unlink()
            (tree / "blog/unseen.md").write_text("# Unseen\n\nIts events were dropped.\n")
        wait_for(
            lambda: "blog/unseen.md" in {p["path"] for p in h.points().values()},
            30,
            "the rescan after the overflow",
        )
        h.settle()
        st = h.service.status()
        assert st["daemon"]["overflows"] == 1 and st["sources"][0]["overflows"] == 1
        assert caplog.text.count("inotify event queue overflowed") == 1, caplog.text
        # a scan reads every folder and file: the kernel queues no event for it
        events = watcher.stats().events
        caplog.set_level(logging.INFO, logger="ingestd")
        caplog.clear()
        h.service.policy.queue_scan(h.source, "a test")
        wait_for(lambda: " in sync: " in caplog.text, 10, "the scan")
        h.settle()
        assert watcher.stats().events == events
        assert h.service.status()["daemon"]["overflows"] == 1


def test_lost_events_coalesce_with_a_queued_scan(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """Losses reported while a scan of the source waits in the queue add no scan."""
    caplog.set_level(logging.INFO, logger="ingestd")
    with Harness(tree, scratch / "state", fake_embedder) as h:
        caplog.clear()
        policy = h.service.policy
        gate = threading.Event()
        h.service.submit(gate.wait, Priority.URGENT)  # the engine thread is busy
        assert policy.queue_scan(h.source, "first")
        for _ in range(5):
            policy.on_lost(h.source, "the inotify event queue overflowed")
        gate.set()
        h.wait_idle()
        assert caplog.text.count("scanning source") == 1, caplog.text
        assert caplog.text.count("a rescan is queued already") == 5


def test_unwatchable_source_is_rescanned_periodically(
    tree: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def no_watch(self: Any) -> None:
        raise OSError(28, "inotify watch limit reached")

    monkeypatch.setattr(watches_mod.SourceWatcher, "start", no_watch)
    watch = {**FAST_WATCH, "unwatched_rescan_s": 0.3}
    with Harness(tree, scratch / "state", fake_embedder, watch=watch) as h:
        assert "Raise fs.inotify.max_user_watches" in caplog.text
        st = h.service.status()["daemon"]
        assert st["unwatched_sources"] == [h.source] and not st["healthy"]
        (tree / "blog/late.md").write_text("# Late\n\nFound by a rescan.\n")
        wait_for(
            lambda: "blog/late.md" in {p["path"] for p in h.points().values()},
            20,
            "the periodic rescan",
        )
        assert h.verify().clean


class _FlakyStore:
    """Wraps a store: the next ``n`` writes raise a connection error."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fail = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name in ("upsert", "delete", "set_payload") and callable(attr):

            def flaky(*a: Any, **kw: Any) -> Any:
                if self.fail > 0:
                    self.fail -= 1
                    raise ConnectionError("qdrant is restarting")
                return attr(*a, **kw)

            return flaky
        return attr


def test_failed_batch_is_queued_again_with_backoff(
    tree: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ingestd.store.vectors.client.qdrant import QdrantStore

    monkeypatch.setattr(jobs_mod, "RETRY_MIN_S", 0.05)
    stores: list[_FlakyStore] = []

    def factory(state: Path) -> Any:
        stores.append(_FlakyStore(QdrantStore(path=str(state / "qdrant"), engine="local")))
        return stores[-1]

    with Harness(tree, scratch / "state", fake_embedder, store_factory=factory) as h:
        b = h.service.batches_done
        stores[-1].fail = 3
        (tree / "blog/2023/integrations.md").unlink()
        (tree / "blog/added.md").write_text("# Added\n\nWhile the store was away.\n")
        h.settle(b, timeout=30)
        assert caplog.text.count("retrying in") >= 3
        assert h.service.status()["daemon"]["healthy"]
        h.assert_matches_oracle(h.state.parent)


def test_status_over_the_control_socket(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    with Harness(tree, scratch / "state", fake_embedder) as h:
        st = request(h.state, "status", {}, timeout=10)
        (src,) = st["sources"]
        assert src["documents"] == 5 and src["chunks"] > 0
        d = st["daemon"]
        assert d["healthy"] and d["watchers_alive"] and d["queue_depth"] == 0
        assert d["phase"] == "watching"
        from click.testing import CliRunner

        from ingestd.daemon.cli.main import cli

        live = CliRunner().invoke(cli, ["status", "--live", "--state-dir", str(h.state)])
        assert live.exit_code == 0 and live.output.startswith("alive: pid "), live.output


def test_periodic_safety_rescan_finds_missed_changes(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ingestd")
    watch = {"debounce_ms": 100, "max_delay_ms": 1000, "rescan_interval_s": 0.5}
    with Harness(tree, scratch / "state", fake_embedder, watch=watch) as h:
        (watcher,) = h.service.watches.watchers
        h.service.watches.watchers.clear()  # events are missed from now on
        watcher.stop()
        (tree / "blog/missed.md").write_text("# Missed\n\nNo event for this one.\n")
        (tree / "blog/2023/integrations.md").unlink()
        wait_for(
            lambda: "blog/missed.md" in {p["path"] for p in h.points().values()},
            20,
            "the periodic rescan",
        )
        h.wait_idle()
        assert "periodic rescan" in caplog.text
        h.assert_matches_oracle(scratch)


def test_status_shows_the_folders_watched_and_ignored_and_the_watch_budget(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    from ingestd.daemon.commands.status_text import status_lines
    from ingestd.daemon.watch.inotify import max_user_watches

    (tree / "node_modules/pkg/lib").mkdir(parents=True)
    (tree / ".venv/lib/site-packages").mkdir(parents=True)
    with Harness(tree, scratch / "state", fake_embedder) as h:
        st = request(h.state, "status", {}, timeout=10)
        (src,) = st["sources"]
        # docs, blog, blog/2023, community, community/end-user; .git-like names not entered
        assert (src["watch_backend"], src["watched_folders"], src["ignored_folders"]) == (
            "inotify",
            5,
            2,
        )
        assert src["overflows"] == 0 and st["daemon"]["overflows"] == 0
        limit = max_user_watches()
        assert st["daemon"]["watches"] == {
            "in_use": 5,
            "limit": limit,
            "share": round(5 / limit, 6) if limit else None,
            "limit_key": "fs.inotify.max_user_watches",
        }
        text = "\n".join(status_lines(st, time.time()))
        assert (
            "watching 5 folders (inotify), 2 ignored (not watched, not entered), 0 overflows"
            in (text)
        )
        assert f"inotify watches: 5 of {limit} (0.00% of fs.inotify.max_user_watches); " in text
        assert "0 queue overflows since start" in text


def test_reload_adds_and_drops_watches(
    tree: Path, tmp_path: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    cfg = _config(tmp_path / "config.yaml", tree, 64)
    (tree / "drafts/old").mkdir(parents=True)
    with Harness(tree, scratch / "state", fake_embedder, config_path=cfg) as h:
        assert h.service.status()["sources"][0]["watched_folders"] == 7
        _config(cfg, tree, 64).write_text(
            cfg.read_text().replace("    root: ", '    exclude: ["drafts/"]\n    root: ')
        )
        h.service.request_reload()
        wait_for(lambda: h.service.reloads == 1, 20, "the reload")
        h.wait_idle()
        (src,) = h.service.status()["sources"]
        assert (src["watched_folders"], src["ignored_folders"]) == (5, 1)
        b = h.service.batches_done
        (tree / "community/new.md").write_text("# New\n\nWatched after the reload.\n")
        h.settle(b)


def test_a_daemon_refused_at_the_lock_says_only_that(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A second ``ingestd run`` on a state dir in use stops nothing: no 'stopped' line."""
    from ingestd.daemon.config import load_config
    from ingestd.daemon.service.service import Service
    from ingestd.daemon.wire.statelock import StateLock, StateLockedError

    root = tmp_path / "docs"
    root.mkdir()
    state = tmp_path / "state"
    held = StateLock(state)
    held.acquire("the first daemon")
    try:
        service = Service(load_config(None, roots=[root]), state)
        with caplog.at_level(logging.INFO), pytest.raises(StateLockedError, match="first daemon"):
            service.serve()
    finally:
        held.release()
    said = [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "stopping" in m or "stopped" in m], said


def test_a_relative_state_dir_of_a_config_is_shown_normalised(tmp_path: Path) -> None:
    from ingestd.daemon.config import load_config

    (tmp_path / "cfg").mkdir()
    (tmp_path / "docs").mkdir()
    cfg = tmp_path / "cfg" / "ingestd.yaml"
    cfg.write_text("state_dir: ../state\nsources:\n  - root: ../docs\n")
    assert load_config(cfg).state_dir == tmp_path.resolve() / "state"
