"""Folders that cannot be watched are found, reported, and rescanned.

The bug this pins: a folder that inotify cannot watch (the per-user watch limit,
``ENOSPC``; a permission error) was silent: watchdog 7 swallows the error of every
watch below the root (``InotifyWatchGroup._add_callback``), so changes there were
never seen while ``status`` said healthy. ingestd now sets its own watches, records
the folders it cannot watch, checks them against the kernel (``/proc/self/fdinfo``),
logs one error naming ``fs.inotify.max_user_watches``, reports the source degraded
(unhealthy, ``status`` exits 1) with the folders, and rescans it every
``watch.unwatched_rescan_s``.

The limit cannot be reached on a shared machine without harming others, so the
inotify add-watch call of ingestd's watcher fails by fault injection, and so does the
probe that tells why a folder is not watched (the real limit is reached inside a user
namespace of its own in ``tests/daemon/watch/test_inotify_watcher.py``).
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingestd.daemon.watch import inotify, watched
from tests.daemon.harness import FAST_WATCH, Harness
from tests.helpers import CountingEmbedder, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="needs Linux inotify"),
    pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning"),
]

WATCH = {**FAST_WATCH, "unwatched_rescan_s": 0.5}


class _WatchLimit:
    """inotify refuses new watches on folders whose path ends with one of ``names``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
        self.names = set(names)
        real = inotify.Inotify.add_watch

        def add_watch(ino: inotify.Inotify, path: str, mask: int) -> int:
            if self.refuses(os.fsdecode(path)):
                raise OSError(errno.ENOSPC, "inotify watch limit reached")
            return real(ino, path, mask)

        monkeypatch.setattr(inotify.Inotify, "add_watch", add_watch)
        monkeypatch.setattr(
            watched, "add_watch_errno", lambda p: errno.ENOSPC if self.refuses(str(p)) else 0
        )

    def refuses(self, path: str) -> bool:
        return any(path.endswith("/" + n) for n in self.names)


def _paths(h: Harness) -> set[str]:
    return {p["path"] for p in h.points().values()}


def test_a_folder_that_cannot_be_watched_degrades_its_source(
    docs: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ingestd.daemon.cli.main import cli

    caplog.set_level(logging.INFO, "ingestd")
    limit = _WatchLimit(monkeypatch, "docs/collector")
    with Harness(docs, scratch / "state", fake_embedder, watch=WATCH) as h:
        st = h.service.status()
        assert not st["daemon"]["healthy"] and st["daemon"]["degraded_sources"] == [h.source]
        (folder,) = st["sources"][0]["unwatched_folders"]
        assert folder["path"] == "docs/collector/"
        assert folder["reason"].startswith(
            "the inotify watch limit is reached (fs.inotify.max_user_watches"
        )
        # `ingestd status` exits 1 (through the control socket of this daemon)
        res = CliRunner().invoke(cli, ["status", "--state-dir", str(h.state)])
        ours = logging.getLogger("ingestd")  # the CLI's set-up turned these off (WARNING)
        ours.propagate, ours.level = True, logging.INFO
        assert res.exit_code == 1, res.output
        assert "not watched docs/collector/: the inotify watch limit" in res.output
        # a change in the unwatched folder is found by the periodic rescan
        (docs / "docs/collector/late.md").write_text("# Late\n\nNo event announced me.\n")
        wait_for(lambda: "docs/collector/late.md" in _paths(h), 30, "the rescan")
        assert caplog.text.count("Raise fs.inotify.max_user_watches") == 1
        # the limit is raised: at its next rescan the source is watched whole again
        limit.names.clear()
        wait_for(lambda: h.service.status()["daemon"]["healthy"], 30, "a healthy daemon")
        assert h.service.status()["sources"][0]["unwatched_folders"] == []
        assert "every folder is watched again" in caplog.text
        b = h.service.batches_done
        (docs / "docs/collector/later.md").write_text("# Later\n\nAn event announces me.\n")
        h.settle(b)
        assert "docs/collector/later.md" in _paths(h)
    assert caplog.text.count("Raise fs.inotify.max_user_watches") == 1


def test_a_new_folder_past_the_limit_is_detected(
    docs: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with Harness(docs, scratch / "state", fake_embedder, watch=WATCH) as h:
        assert h.service.status()["daemon"]["healthy"]
        _WatchLimit(monkeypatch, "new")  # the limit is reached from now on
        b = h.service.batches_done
        (docs / "new").mkdir()
        (docs / "new/first.md").write_text("# First\n\nIn a folder that gets no watch.\n")
        h.settle(b)
        wait_for(
            lambda: h.service.status()["daemon"]["degraded_sources"] == [h.source],
            20,
            "the source to be degraded",
        )
        (entry,) = h.service.status()["sources"][0]["unwatched_folders"]
        assert entry["path"] == "new/"
        (docs / "new/second.md").write_text("# Second\n\nFound by a rescan.\n")
        wait_for(lambda: {"new/first.md", "new/second.md"} <= _paths(h), 30, "the rescan")
    assert "Raise fs.inotify.max_user_watches" in caplog.text


def test_a_source_whose_root_cannot_be_watched_is_rescanned(
    docs: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _WatchLimit(monkeypatch, "docs")  # the root itself: start() raises, the source is unwatched
    with Harness(docs, scratch / "state", fake_embedder, watch=WATCH) as h:
        d = h.service.status()["daemon"]
        assert d["unwatched_sources"] == [h.source] and not d["healthy"]
        (entry,) = h.service.status()["sources"][0]["unwatched_folders"]
        assert entry["path"] == "./" and "max_user_watches" in entry["reason"]
        (docs / "late.md").write_text("# Late\n\nFound by a rescan.\n")
        wait_for(lambda: "late.md" in _paths(h), 30, "the rescan")
    assert caplog.text.count("Raise fs.inotify.max_user_watches") == 1
