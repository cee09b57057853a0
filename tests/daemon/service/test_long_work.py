"""Long work never starves the daemon: one huge document is written in slices.

Before slicing, a 700 KB markdown file (2,384 chunks) was one write batch: the daemon
sent no ``WATCHDOG=1`` for 329 s (systemd kills it at ``WatchdogSec``), an edit of
another file waited for the whole document, and SIGTERM was ignored until it was done.
Now every slice (at most 32 chunks) ends in a checkpoint: the daemon pings the
watchdog, serves searches and other files' changes, and honours a stop request.

The service tests run a real :class:`Service` in a thread with a slow fake embedder;
the last test runs ``ingestd run`` with the real model under a fake systemd.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.sync.writing.writer import SLICE_CHUNKS
from ingestd.store.search.query import Filters
from tests.daemon.harness import FAST_WATCH, Harness
from tests.helpers import (
    MD_DOCS,
    CountingEmbedder,
    fake_vectors,
    make_engine,
    open_state_store,
    run_cli,
    start_ingestd_run,
    wait_for,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning"),
]

#: Small token windows, so that a modest file makes hundreds of chunks.
SMALL_WINDOWS = [{"match": ["*"], "chunker": "token", "params": {"max_tokens": 32}}]


def big_text(n_lines: int, tag: str = "") -> str:
    """Distinct lines (no two chunks alike, so nothing comes from the cache)."""
    return "".join(
        f"Line {i}{tag}: collector {i * 7919 % 10007} exports span batch {i} to backend {i % 13}.\n"
        for i in range(n_lines)
    )


def huge_markdown(min_bytes: int) -> str:
    """Real md-docs pages run together into one markdown file of at least ``min_bytes``."""
    parts: list[str] = []
    size = 0
    for f in sorted((MD_DOCS / "docs").rglob("*.md")):
        text = f.read_text(encoding="utf-8")
        parts.append(text)
        size += len(text.encode())
        if size >= min_bytes:
            break
    return "\n\n".join(parts)


class SlowEmbedder(CountingEmbedder):
    """The fake embedder at a fixed cost per text (seconds), like a slow real model."""

    def __init__(self, per_text: float) -> None:
        super().__init__(fake_vectors)
        self.per_text = per_text

    def __call__(self, texts: Sequence[str]) -> Any:
        time.sleep(self.per_text * len(texts))  # the model's cost, not a wait for an event
        return super().__call__(texts)


class FakeSystemd:
    """The notify socket's side: a thread records every datagram with its arrival time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.05)
        self.messages: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            self.messages.append((time.monotonic(), data.decode()))

    def max_gap(self, since: float, until: float) -> float:
        """Longest time between two ``WATCHDOG=1`` in ``[since, until]`` (and its ends)."""
        times = [
            since,
            *(t for t, m in list(self.messages) if m == "WATCHDOG=1" and since <= t <= until),
        ]
        times.append(until)
        return max(b - a for a, b in zip(times, times[1:], strict=False))

    def timeline(self, t0: float) -> list[str]:
        """Every message but ``WATCHDOG=1``, and each ping gap over a second (for failures)."""
        out, last = [], t0
        for t, m in list(self.messages):
            if m == "WATCHDOG=1":
                if t - last > 1:
                    out.append(f"{t - t0:.1f} gap {t - last:.1f}")
                last = t
            else:
                out.append(f"{t - t0:.1f} {m}")
        return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def _in_flight(h: Harness, path: str) -> Any:
    engine = h.service.engine
    for f in list(engine.writer.in_flight.values()) if engine is not None else ():
        if f.path == path:
            return f
    return None


def test_watchdog_is_fed_searches_and_edits_served_while_a_huge_document_is_written(
    tmp_path: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 6 s: pings every 1 s (min(1 s, usec / 4)), and no gap may exceed 3 s, while the
    # document takes several times that (asserted below): only slicing passes
    usec = 6_000_000
    sysd = FakeSystemd(tmp_path / "notify.sock")
    monkeypatch.setenv("NOTIFY_SOCKET", str(sysd.path))
    monkeypatch.setenv("WATCHDOG_USEC", str(usec))
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    root = tmp_path / "docs"
    root.mkdir()
    (root / "seed.md").write_text("# Seed\n\nOne page.\n")
    embed = SlowEmbedder(0.01)  # ~0.16 s per call of 16 texts
    h = Harness(root, scratch / "state", embed, rules=SMALL_WINDOWS).start()
    try:
        (root / "huge.md").write_text(big_text(700))
        t0 = time.monotonic()
        flying = wait_for(  # chunked (in a worker thread) and being written
            lambda: (f := _in_flight(h, "huge.md")) and f.chunks_total and f,
            30,
            "huge.md to be in flight",
        )
        assert flying.chunks_total > 10 * SLICE_CHUNKS

        # a search is answered mid-document (it runs at a checkpoint)
        hits = h.call(lambda e: e.resources.store.point_count("ingestd"), timeout=10)
        assert hits >= 1
        # an edit of another file becomes searchable while huge.md is still in flight
        (root / "other.md").write_text("# Other\n\nAn edit made during the long write.\n")

        def other_written() -> bool:
            doc = h.service.engine.resources.manifest.document(h.source, "other.md")
            return doc is not None and doc.state == "ok"

        wait_for(other_written, 30, "the edit of other.md to be written")
        still = _in_flight(h, "huge.md")
        assert still is not None and still.chunks_done < still.chunks_total, (
            "other.md waited for huge.md to finish"
        )
        st = h.service.status()["daemon"]
        assert [f["path"] for f in st["in_flight"]] == ["huge.md"]
        assert st["in_flight"][0]["chunks_done"] > 0
        assert st["progress"] == {} or all(p["docs_total"] >= 1 for p in st["progress"].values())

        wait_for(lambda: _in_flight(h, "huge.md") is None, 120, "huge.md to be written")
        t1 = time.monotonic()
        gap = sysd.max_gap(t0, t1)
        print(
            f"fake slow embedder: max WATCHDOG=1 gap {gap:.2f} s in {t1 - t0:.1f} s "
            f"(WATCHDOG_USEC {usec} us)"
        )
        assert gap <= usec / 2e6, f"{gap:.2f} s without WATCHDOG=1 (WATCHDOG_USEC {usec} us)"
        assert t1 - t0 > usec / 1e6, f"huge.md took {t1 - t0:.1f} s: too short to show slicing"
        h.settle()
        h.assert_matches_oracle(scratch)
    finally:
        h.stop()
        sysd.close()


def test_lag_counts_a_long_document_waiting_for_its_turn(tmp_path: Path, scratch: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    embed = SlowEmbedder(0.005)
    h = Harness(root, scratch / "state", embed, rules=SMALL_WINDOWS).start()
    try:
        (root / "a.md").write_text(big_text(500, "a"))
        wait_for(lambda: _in_flight(h, "a.md"), 30, "a.md to be in flight")
        (root / "b.md").write_text(big_text(500, "b"))  # written after a.md: it waits
        # status reads the lag at its own moment: b.md may be taken up between two reads
        wait_for(
            lambda: h.service.status()["daemon"]["lag_seconds"] > 1.0,
            30,
            "status to count the waiting document's lag",
        )
        h.settle(timeout=120)
        assert h.service.lag() == 0.0
        h.assert_matches_oracle(scratch)
    finally:
        h.stop()


def test_a_later_change_of_a_long_document_supersedes_its_write_in_flight(
    tmp_path: Path, scratch: Path
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    embed = SlowEmbedder(0.005)
    h = Harness(root, scratch / "state", embed, rules=SMALL_WINDOWS).start()
    try:
        (root / "a.md").write_text(big_text(600, "a"))
        first = wait_for(
            lambda: (f := _in_flight(h, "a.md")) and f.chunks_done >= SLICE_CHUNKS and f,
            30,
            "a.md to be under way",
        )
        (root / "a.md").write_text(big_text(600, "b"))  # the same document, changed
        h.settle(timeout=120)
        h.assert_matches_oracle(scratch)
        old = [t for t in embed.texts if "a:" in t]
        assert len(old) < first.chunks_total - SLICE_CHUNKS, (
            "the superseded version was written to its end"
        )
    finally:
        h.stop()


def test_stop_mid_document_exits_fast_and_the_next_start_reuses_its_vectors(
    tmp_path: Path, scratch: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ingestd")
    root = tmp_path / "docs"
    root.mkdir()
    (root / "huge.md").write_text(big_text(600))
    embed = SlowEmbedder(0.01)
    h = Harness(root, scratch / "state", embed, rules=SMALL_WINDOWS).start(wait_idle=False)
    flying = wait_for(
        lambda: (f := _in_flight(h, "huge.md")) and f.chunks_done >= 3 * SLICE_CHUNKS and f,
        60,
        "huge.md to be well under way",
    )
    total = flying.chunks_total
    t0 = time.monotonic()
    assert h.stop(timeout=20) == 0
    assert time.monotonic() - t0 < 5, "SIGTERM must end the work at the next checkpoint"
    done_before = len(embed.texts)
    assert done_before < total
    assert "interrupted" in caplog.text
    assert "in sync" not in caplog.text
    # the slices written before the stop are in the store, uncommitted: no search sees them
    store = open_state_store(scratch / "state")
    try:
        held = store.point_count("ingestd")
        hits = store.search(
            "ingestd",
            dense=fake_vectors(["Line 5: collector"])[0],
            sparse=None,
            limit=50,
            filters=Filters(path="huge.md"),
            mode="dense",
        )
    finally:
        store.close()
    assert held >= 3 * SLICE_CHUNKS, held
    assert hits == [], f"{len(hits)} uncommitted points of huge.md found by search"

    again = CountingEmbedder(fake_vectors)
    with Harness(root, scratch / "state", again, rules=SMALL_WINDOWS) as h2:
        h2.settle(timeout=60)
        h2.assert_matches_oracle(scratch)
    # the slices written before the stop cost nothing but cache lookups
    assert len(again.texts) <= total - done_before + SLICE_CHUNKS


def test_file_over_max_chunks_is_skipped_with_a_status_entry(
    tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "huge.md").write_text(big_text(400))
    (root / "fine.md").write_text("# Fine\n\nA normal page.\n")
    eng = make_engine(
        root, tmp_path / "state", fake_embedder, rules=SMALL_WINDOWS, files={"max_chunks": 50}
    )
    try:
        (name,) = eng.context.sources
        res = eng.sync(name)
        assert (res.indexed, res.failed) == (1, 1)
        failed = dict(eng.resources.manifest.failed(name))
        assert "files.max_chunks 50" in failed["huge.md"]
        assert all("fine" in t.lower() or "normal" in t.lower() for t in fake_embedder.texts)
        assert eng.verify(name).clean
    finally:
        eng.close()


def test_ingestd_run_with_the_real_model_feeds_the_watchdog_and_stops_fast(
    tmp_path: Path,
) -> None:
    """The shipped behaviour end to end: real model, a real ``ingestd run``, fake systemd.

    The file is the reported case: 700 KB of real markdown, thousands of chunks of the
    default rule; the test stops the daemon once a few slices are written.
    """
    usec = 10_000_000
    root = tmp_path / "docs"
    root.mkdir()
    (root / "huge.md").write_text(huge_markdown(700_000))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        json.dumps({"sources": [{"name": "docs", "root": str(root)}], "watch": FAST_WATCH})
    )
    sysd = FakeSystemd(tmp_path / "notify.sock")
    state = tmp_path / "state"
    log = tmp_path / "ingestd.log"
    env = {**os.environ, "NOTIFY_SOCKET": str(sysd.path), "WATCHDOG_USEC": str(usec)}
    env.pop("WATCHDOG_PID", None)
    env.pop("JOURNAL_STREAM", None)
    proc = start_ingestd_run(cfg, state, log, env)
    try:
        wait_for(lambda: any(m == "READY=1" for _, m in sysd.messages), 60, "READY=1")
        t0 = time.monotonic()

        def flying() -> Any:
            out = run_cli("status", "--json", "--state-dir", str(state), timeout=30)
            d = json.loads(out.stdout or "{}").get("daemon") or {}
            f = [x for x in d.get("in_flight", []) if x["path"] == "huge.md"]
            return f[0] if f and f[0]["chunks_done"] >= 2 * SLICE_CHUNKS else None

        wait_for(flying, 300, "huge.md to be written with the real model", interval=1.0)
        (root / "zebra.md").write_text(
            "# Zebras\n\nZebra herds migrate across the Serengeti plains every year.\n"
        )

        def zebra_found() -> bool:
            out = run_cli("search", "--state-dir", str(state), "--json", "-k", "3",
                          "zebra migration", timeout=60)  # fmt: skip
            return out.returncode == 0 and any(
                h["path"] == "zebra.md" for h in json.loads(out.stdout)
            )

        wait_for(zebra_found, 90, "the edit to be searchable while huge.md is written", 1.0)
        assert flying() is not None or proc.poll() is None
        t1 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
        stopped = time.monotonic() - t1
        assert code == 0, log.read_text()[-3000:]
        assert stopped < 5 + 2, f"SIGTERM took {stopped:.1f} s"  # + the process's own exit
        gap = sysd.max_gap(t0, t1)
        text = log.read_text()
        print(f"real model: max gap between WATCHDOG=1 {gap:.2f} s (WATCHDOG_USEC {usec} us), "
              f"SIGTERM to exit {stopped:.2f} s")  # fmt: skip
        assert gap <= usec / 2e6, f"{gap:.1f} s without WATCHDOG=1: {sysd.timeline(t0)}\n{text}"
        assert "interrupted" in text and "in sync" not in text, text[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        sysd.close()


def test_verify_while_a_long_document_is_written_leaves_it_out(
    tmp_path: Path, scratch: Path
) -> None:
    """verify through the daemon mid-write: clean for the rest, the document named as writing.

    Its points are there only in part (and uncommitted) until the write commits; a
    verify that compared them reported them missing and stale, and a repair would
    have written the document a second time beside the write in flight.
    """
    root = tmp_path / "docs"
    root.mkdir()
    (root / "huge.md").write_text(big_text(600))
    (root / "small.md").write_text("# Small\n\nA short page.\n")
    embed = SlowEmbedder(0.01)
    with Harness(root, scratch / "state", embed, rules=SMALL_WINDOWS).start(wait_idle=False) as h:
        wait_for(
            lambda: (f := _in_flight(h, "huge.md")) and f.chunks_done >= 2 * SLICE_CHUNKS,
            60,
            "huge.md to be under way",
        )
        (name,) = h.call(lambda e: list(e.context.sources))
        for repair in (False, True):
            rep = h.call(lambda e, repair=repair: e.verify(name, repair=repair))
            assert rep.writing == ["huge.md"]
            assert rep.clean, rep.as_dict()
            assert rep.expected > 0  # small.md was compared
        assert _in_flight(h, "huge.md") is not None, "the write went on"
        rep = h.settle(timeout=120)
        assert rep.writing == [] and rep.clean
        h.assert_matches_oracle(scratch)
