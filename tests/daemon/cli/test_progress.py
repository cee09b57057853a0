"""The progress shown on a terminal: durations and a sync's progress in words."""

from __future__ import annotations

import time

import pytest

from ingestd.daemon.cli.shared.progress import duration, sync_detail
from ingestd.daemon.sync.types import SyncProgress


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (41.6, "42s"), (59.4, "59s"), (60, "1m00s"), (185, "3m05s"), (3720, "1h02m")],
)
def test_duration_in_words(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_sync_detail_gives_the_time_left_while_indexing_and_the_phase_otherwise() -> None:
    # a quarter of the bytes in 10 s: 30 s left (the ETA reads the real clock)
    p = SyncProgress(
        "docs",
        docs_done=3,
        docs_total=12,
        bytes_done=10,
        bytes_total=40,
        chunks_embedded=40,
        started=time.monotonic() - 10,
    )
    assert sync_detail(p) == "3/12 documents, 40 chunks embedded, 30s left"
    loading = SyncProgress("docs", phase="loading embedding model", docs_total=12)
    assert sync_detail(loading) == "loading embedding model... 0/12 documents, 0 chunks embedded"
    assert sync_detail(SyncProgress("docs", docs_total=12)) == "0/12 documents, 0 chunks embedded"


def test_progress_bars_draw_one_bar_per_key_on_stderr_and_remove_them_at_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ingestd.daemon.cli.shared.progress import progress_bars

    with progress_bars() as show:
        show("a", "indexing docs", 0, 40, "0/12 documents")
        show("b", "indexing notes", 5, 0, "loading embedding model...")
        show("a", "indexing docs", 30, 40, "9/12 documents, 1m05s left")
        drawn = capsys.readouterr()
    assert drawn.out == ""  # stdout stays the command's output
    assert "indexing docs" in drawn.err and "indexing notes" in drawn.err
    assert "75%, 9/12 documents, 1m05s left" in drawn.err
    # a total below 1 counts as 1, and a done past the total fills the bar
    assert "100%, loading embedding model..." in drawn.err
    ended = capsys.readouterr().err
    assert ended.strip("\r\n\x1b[A ") == ""  # closing clears the lines: nothing is left
