"""``status`` and a search without a daemon see a store that lost data, and name the fix.

Before, each of these left ``status`` at exit 0 with the manifest's counts, and a
search answered "no results" (or from half the index) with exit 0, until ``run``,
``resync`` or MCP ``sync`` repaired it: a deleted store folder, a deleted collection
folder, an alias to a missing version, a deleted segment, a cut id tracker, a damaged
manifest page no count reads. Now both exit 1 with one line that names the command that
repairs the state, and that command brings back a store equal to a from-scratch ingest.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import (
    REPO,
    assert_matches_oracle,
    edge_shard,
    fake_vectors,
    ingested_tree,
    run_cli,
    store_folder,
)

pytestmark = [pytest.mark.slow, pytest.mark.engine("edge")]


def _delete_store(state: Path) -> None:
    shutil.rmtree(store_folder(state))


def _delete_collection(state: Path) -> None:
    shutil.rmtree(edge_shard(state))


def _alias_to_a_missing_version(state: Path) -> None:
    aliases = store_folder(state) / "edge.json"
    data = json.loads(aliases.read_text())
    data["aliases"]["ingestd"] = "ingestd__v9"
    aliases.write_text(json.dumps(data))


def _delete_segment(state: Path) -> None:
    biggest = max(
        (edge_shard(state) / "segments").iterdir(),
        key=lambda p: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()),
    )
    shutil.rmtree(biggest)


def _cut_id_tracker(state: Path) -> None:
    for tracker in (edge_shard(state) / "segments").glob("*/mutable_id_tracker.mappings"):
        size = tracker.stat().st_size
        with tracker.open("r+b") as f:
            f.truncate(size // 2)


def _damage_a_manifest_page(state: Path) -> None:
    db = state / "manifest.db"
    for side in state.glob("manifest.db-*"):
        side.unlink()
    data = bytearray(db.read_bytes())
    page = 4096
    last = len(data) // page - 1  # a page of the chunk rows no count reads
    data[last * page + 100 : last * page + 400] = b"\xde\xad\xbe\xef" * 75
    db.write_bytes(bytes(data))


LOSSES: list[Callable[[Path], None]] = [
    _delete_store,
    _delete_collection,
    _alias_to_a_missing_version,
    _delete_segment,
    _cut_id_tracker,
    _damage_a_manifest_page,
]


@pytest.mark.parametrize("lose", LOSSES, ids=lambda f: f.__name__.strip("_"))
def test_status_and_a_search_without_a_daemon_say_what_was_lost_and_the_fix(
    tmp_path: Path, lose: Callable[[Path], None]
) -> None:
    root, state = ingested_tree(tmp_path)
    lose(state)
    status = run_cli("status", "--state-dir", str(state))
    assert status.returncode == 1, status.stdout + status.stderr
    search = run_cli("search", "--state-dir", str(state), "--mode", "sparse", "collector")
    assert search.returncode == 1, search.stdout + search.stderr
    for out in (status.stderr, search.stderr):
        assert "Traceback" not in out
        fix = "ingestd resync --rebuild" if "is damaged" in out else "ingestd resync"
        assert f"`{fix}" in out, out
    # the fix the line names
    args = ["resync", "--state-dir", str(state), str(root)]
    if "is damaged" in status.stderr:
        args.insert(1, "--rebuild")
    fixed = subprocess.run(
        [sys.executable, "-m", "tests.faults.fakecli", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert run_cli("status", "--state-dir", str(state)).returncode == 0
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
