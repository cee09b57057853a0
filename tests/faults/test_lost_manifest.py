"""A deleted manifest while the store holds every point: ``status`` says so, and the fix.

Before, ``status`` said "no sources indexed yet" and exited 0 while the store held
every point. Now it exits 1 with one line naming the missing manifest, the points the
store holds (counted from the clean-close record or the files: no point is read), and
the ``resync`` that re-records them; that command, run as printed with the sources'
paths, brings back a state equal to a from-scratch ingest. Both embedded engines.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import (
    REPO,
    assert_matches_oracle,
    fake_vectors,
    ingested_tree,
    run_cli,
    store_snapshot,
)

pytestmark = pytest.mark.slow


def test_status_of_a_deleted_manifest_names_the_points_the_store_holds_and_the_fix(
    tmp_path: Path,
) -> None:
    root, state = ingested_tree(tmp_path)
    held = len(store_snapshot(state, sparse=False))
    for f in state.glob("manifest.db*"):
        f.unlink()

    as_json = run_cli("status", "--state-dir", str(state), "--json")
    assert as_json.returncode == 1, as_json.stderr
    lost = json.loads(as_json.stdout)["manifest_lost"]
    assert lost["missing"] is True and lost["points"] == held
    assert lost["manifest"] == str(state / "manifest.db")
    (physical,) = lost["collections"]

    status = run_cli("status", "--state-dir", str(state))
    assert status.returncode == 1, status.stdout + status.stderr
    assert "no sources indexed yet" not in status.stdout
    fix = f"ingestd resync --state-dir {shlex.quote(str(state))} PATH..."
    assert (
        f"error: the manifest {state / 'manifest.db'} is missing, yet the vector store "
        f"holds {held:,} points (collection {physical}): nothing can be synced or searched "
        f"by source until `{fix}` (PATH: each source's root folder) re-records them"
    ) in status.stdout.splitlines()

    fixed = subprocess.run(
        [sys.executable, "-m", "tests.faults.fakecli", "resync", "--state-dir", str(state),
         str(root)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert f"{held} points re-recorded in the manifest" in fixed.stderr
    after = run_cli("status", "--state-dir", str(state))
    assert after.returncode == 0, after.stdout
    assert "manifest_lost" not in run_cli("status", "--state-dir", str(state), "--json").stdout
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


def test_status_of_a_fresh_state_dir_still_says_nothing_is_indexed(tmp_path: Path) -> None:
    status = run_cli("status", "--state-dir", str(tmp_path / "state"))
    assert status.returncode == 0, status.stderr
    assert "no sources indexed yet" in status.stdout.splitlines()


def test_status_of_a_running_engine_says_its_manifest_file_was_deleted(tmp_path: Path) -> None:
    from ingestd.daemon.commands.status import status_of
    from ingestd.daemon.commands.status_text import status_lines
    from tests.helpers import copy_tree, make_engine

    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    eng = make_engine(root, state, fake_vectors)
    try:
        for name in eng.context.sources:
            eng.sync(name)
        st = status_of(eng.resources.manifest, eng, state)
        assert "manifest_lost" not in st
        for f in state.glob("manifest.db*"):
            f.unlink()
        st = status_of(eng.resources.manifest, eng, state)
    finally:
        eng.close()
    assert st["manifest_lost"] == {
        "manifest": str(state / "manifest.db"), "missing": True, "running": True
    }  # fmt: skip
    fix = f"ingestd resync --state-dir {shlex.quote(str(state))} PATH..."
    assert (
        f"error: the manifest {state / 'manifest.db'} was deleted while the daemon runs: "
        "what it records is lost when the daemon stops; stop it, then "
        f"`{fix}` re-records the store's points in a new manifest"
    ) in list(status_lines({**st, "daemon": None}, 0.0))


def test_status_of_an_empty_manifest_beside_a_full_store_exits_1(tmp_path: Path) -> None:
    from ingestd.store.manifest.manifest import Manifest

    _, state = ingested_tree(tmp_path)
    held = len(store_snapshot(state, sparse=False))
    for f in state.glob("manifest.db*"):
        f.unlink()
    Manifest(f"sqlite:///{state / 'manifest.db'}").close()  # a new manifest: no source
    status = run_cli("status", "--state-dir", str(state))
    assert status.returncode == 1, status.stdout + status.stderr
    assert (
        f"error: the manifest {state / 'manifest.db'} records no source, yet the vector "
        f"store holds {held:,} points"
    ) in status.stdout
