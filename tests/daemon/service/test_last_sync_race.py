"""``last_sync`` after a start-up reconcile whose long document is written before it ends.

A scan hands long documents to background writing and records ``last_sync`` when the
last of them is written. When a long document is written while the scan is still
indexing the other files (the daemon interleaves its slices with them), the scan found
no unit left to mark, and ``last_sync`` stayed ``never`` for good after a complete
first ingest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.daemon.harness import Harness
from tests.daemon.service.test_long_work import SMALL_WINDOWS, SlowEmbedder, big_text
from tests.helpers import wait_for


@pytest.mark.slow
def test_a_reconcile_whose_long_document_is_written_first_records_its_last_sync(
    tmp_path: Path, scratch: Path
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a-long.md").write_text(big_text(80, "a"))  # scanned first: handed off
    for i in range(300):  # indexed one by one while the long document is written
        (root / f"page-{i:03d}.md").write_text(f"# Page {i}\n\nThe otter number {i} swims.\n")
    h = Harness(root, scratch / "state", SlowEmbedder(0.002), rules=SMALL_WINDOWS).start()
    try:
        h.settle(timeout=120)

        def recorded() -> bool:
            (src,) = h.service.status()["sources"]
            return src["last_sync"] is not None

        wait_for(recorded, 30, "last_sync after the complete start-up reconcile")
        h.assert_matches_oracle(scratch)
    finally:
        h.stop()
