"""After an unclean end the store is still checked point by point; after a clean stop, not.

A clean close is recorded (:mod:`ingestd.daemon.sync.state.clean_close`), so the check that
reads every point runs only when something may be torn. These pin both sides with a
real ``ingestd run`` (the fake embedder of :mod:`tests.faults.fakecli`): stopped with
SIGTERM, the next process counts; killed with SIGKILL after writing, with its
write-ahead log then cut as a torn write leaves it, the next process checks every
point, heals the shard, and ends equal to a from-scratch ingest.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.test_torn_wal import cut_wal
from tests.helpers import (
    REPO,
    assert_matches_oracle,
    fake_vectors,
    ingested_tree,
    make_engine,
    run_cli,
    store_folder,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.engine("edge")]


def _run_and_edit(root: Path, state: Path, log: Path, sig: signal.Signals) -> None:
    """``ingestd run``, an edit it writes, then ``sig``."""
    daemon = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.fakecli", "run", "--state-dir", str(state), str(root)],
        cwd=REPO,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: "in sync:" in log.read_text(), 120, "the first reconcile")
        edited = time.time()
        page = root / "docs/concepts/glossary.md"
        page.write_text(page.read_text().replace("## ", "## Renamed: ", 3) + "\n\nAppended.\n")

        def written() -> bool:
            st = json.loads(run_cli("status", "--state-dir", str(state), "--json").stdout or "{}")
            (src,) = st.get("sources") or [{}]
            return (src.get("last_change_synced") or 0) > edited and not src.get("pending")

        wait_for(written, 120, "the edit to be written")
        daemon.send_signal(sig)
        daemon.wait(timeout=120)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


def _first_check(root: Path, state: Path) -> bool:
    """Whether the next process's first store check reads every point."""
    eng = make_engine(root, state, fake_vectors)
    try:
        return bool(eng.check_store(next(iter(eng.context.sources))).deep)
    finally:
        eng.close()


def test_after_a_clean_stop_the_next_process_only_counts(tmp_path: Path) -> None:
    root, state = ingested_tree(tmp_path)
    _run_and_edit(root, state, tmp_path / "run.log", signal.SIGTERM)
    assert "ingestd stopped" in (tmp_path / "run.log").read_text()
    assert (state / "clean-close.json").is_file()
    assert _first_check(root, state) is False
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_a_kill_with_a_torn_log_is_found_and_healed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root, state = ingested_tree(tmp_path)
    _run_and_edit(root, state, tmp_path / "run.log", signal.SIGKILL)
    assert not (state / "clean-close.json").exists()  # removed when the daemon opened it
    assert cut_wal(store_folder(state)), "the log holds the edit's writes"
    eng = make_engine(root, state, fake_vectors)
    try:
        name = next(iter(eng.context.sources))
        chk = eng.check_store(name)
        assert chk.deep, "an unclean end is checked point by point"
        eng.sync(name)
        assert eng.verify(name).clean
    finally:
        eng.close()
    assert "a torn log" in caplog.text  # the shard was rebuilt from its points
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
    assert _first_check(root, state) is False  # that close was clean
