"""A file that cannot be read is tried again with exponential back-off, quietly.

The bug this pins: an unreadable file was retried every 1-5 s for ever, with a
warning each time (77 warnings in 7 minutes). Now each failure doubles the delay up
to ``files.retry_max_s``, one line is logged per change of state (first failure,
another error, readable again), and ``status`` lists the file with its error, tries
and next try. Reads fail by fault injection (tests run as root, who can read a
``chmod 000`` file); the clock is injected, so no test sleeps.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.sync.backoff import Backoff
from ingestd.daemon.sync.preparing import documents
from ingestd.daemon.sync.types import UnreadableFile
from tests.daemon.harness import Harness
from tests.helpers import CountingEmbedder, wait_for


class _Locked:
    """Makes reads of some paths fail like a file without read permission."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *paths: str) -> None:
        self.paths = set(paths)
        self.error = "Permission denied"
        real = documents.read_file

        def read_file(path: Path, rel: str) -> bytes:
            if rel in self.paths:
                raise UnreadableFile(f"{rel}: cannot be read ({self.error})")
            return real(path, rel)

        monkeypatch.setattr(documents, "read_file", read_file)


def test_backoff_doubles_up_to_the_cap() -> None:
    b: Backoff[str] = Backoff(1.0, 10.0)
    assert [b.delay(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    assert b.failed("f", "denied", now=100.0)  # a change of state
    assert b.due(100.9) == [] and b.due(101.0) == ["f"]
    assert not b.failed("f", "denied", now=101.0)  # the same state again
    assert b.get("f").next_at == 103.0  # type: ignore[union-attr]
    assert b.failed("f", "vanished", now=103.0)  # another error: a change
    failing = b.succeeded("f")
    assert failing is not None and failing.attempts == 3
    assert b.succeeded("f") is None and len(b) == 0
    with pytest.raises(ValueError):
        Backoff(2.0, 1.0)


def test_an_unreadable_file_backs_off_and_warns_once(
    docs: Path,
    tmp_path: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    caplog.set_level(logging.INFO, "ingestd")
    clock = [1000.0]
    cfg = load_config(None, roots=[docs], overrides={"files": {"retry_max_s": 8}})
    eng = Engine(cfg, tmp_path / "state", embed_model=fake_embedder, now=lambda: clock[0])
    (name,) = eng.context.sources
    locked = _Locked(monkeypatch, "good.md")
    res = eng.sync(name)
    assert (res.indexed, res.retry) == (2, ["good.md"])
    waits = []
    for _ in range(6):
        (entry,) = eng.failures.retrying(name)
        assert entry["path"] == "good.md" and entry["error"].endswith("(Permission denied)")
        waits.append(entry["retry_in_seconds"])
        clock[0] += entry["retry_in_seconds"] - 0.01
        assert eng.failures.retry.due(clock[0]) == []  # not before its time
        clock[0] += 0.01
        assert eng.failures.retry.due(clock[0]) == [(name, "good.md")]
        assert eng.sync(name, ["good.md"]).retry == ["good.md"]
    assert waits == [1, 2, 4, 8, 8, 8]
    assert caplog.text.count("good.md: cannot be read") == 1
    locked.error = "Resource temporarily unavailable"  # another error: a new warning
    eng.sync(name, ["good.md"])
    assert caplog.text.count("good.md: cannot be read") == 2
    locked.paths.clear()
    clock[0] += 8
    res = eng.sync(name, ["good.md"])
    assert (res.indexed, res.retry) == (1, [])
    assert eng.failures.retrying(name) == []
    assert "good.md can be read again (after 8 failed tries)" in caplog.text
    assert eng.verify(name).clean
    eng.close()


def test_a_vanished_file_is_no_longer_retried(
    docs: Path, tmp_path: Path, fake_embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers import make_engine

    eng = make_engine(docs, tmp_path / "state", fake_embedder)
    (name,) = eng.context.sources
    _Locked(monkeypatch, "good.md")
    assert eng.sync(name).retry == ["good.md"]
    (docs / "good.md").unlink()
    assert eng.sync(name, ["good.md"]).retry == []
    assert eng.failures.retrying(name) == []
    eng.close()


@pytest.mark.slow
def test_the_daemon_retries_with_backoff_and_status_shows_it(
    docs: Path,
    scratch: Path,
    fake_embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "ingestd")
    locked = _Locked(monkeypatch, "good.md")
    files = {"retry_initial_s": 0.05, "retry_max_s": 0.2}
    with Harness(docs, scratch / "state", fake_embedder, files=files) as h:

        def entry() -> Any:
            st = h.service.status()
            (src,) = st["sources"]
            return src["retrying"][0] if src["retrying"] else None

        wait_for(lambda: (entry() or {}).get("attempts", 0) >= 6, 30, "six tries")
        e = entry()
        assert e["path"] == "good.md" and e["error"].endswith("(Permission denied)")
        assert 0 <= e["retry_in_seconds"] <= 0.2
        st = h.service.status()["daemon"]
        assert st["healthy"] and st["lag_seconds"] < 5  # a retry is not lag
        assert caplog.text.count("good.md: cannot be read") == 1
        locked.paths.clear()
        wait_for(
            lambda: "good.md" in {p["path"] for p in h.points().values()},
            30,
            "good.md indexed once readable",
        )
        wait_for(lambda: entry() is None, 10, "the retry entry to go")
        h.settle()
        h.assert_matches_oracle(scratch)
    assert caplog.text.count("good.md can be read again") == 1
