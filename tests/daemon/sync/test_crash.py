"""A sync killed with SIGKILL anywhere leaves a state the next sync makes clean.

The write order (pending ids, upsert, delete stale, commit) is what makes this hold.
The deterministic cases run a child process that kills itself right before or after
the N-th call of a chosen step; the last case kills a real ``ingestd resync`` process
(real model) in the middle of its first ingest.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import (
    REPO,
    assert_matches_oracle,
    copy_tree,
    fake_vectors,
    make_engine,
    run_cli,
    wait_for,
)

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {repo!r})
    from tests.helpers import fake_vectors, make_engine
    from ingestd.store.manifest.manifest import Manifest
    from ingestd.store.vectors.edge.edge import EdgeStore
    from ingestd.store.vectors.client.qdrant import QdrantStore

    root, state, target, when = sys.argv[1:5]
    nth = int(sys.argv[5])
    import ingestd.daemon.sync.writing.applier as applier_module

    applier_module.GROUP_CHUNKS = 20  # several write batches, so some crashes land mid-way
    store_cls = EdgeStore if os.environ.get("INGESTD_QDRANT_ENGINE") == "edge" else QdrantStore
    owners = {{"upsert": store_cls, "delete": store_cls, "set_payload": store_cls,
               "add_pending_many": Manifest, "commit_documents": Manifest}}
    cls = owners[target]
    orig = getattr(cls, target)
    calls = [0]

    def wrapped(self, *a, **k):
        calls[0] += 1
        if calls[0] == nth and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        out = orig(self, *a, **k)
        if calls[0] == nth and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(cls, target, wrapped)
    eng = make_engine(root, state, fake_vectors)
    eng.sync(next(iter(eng.context.sources)), allow_mass_delete=True)
    eng.close()
    print("finished without being killed")
    """
)


def run_killed_sync(root: Path, state: Path, target: str, when: str, nth: int) -> int:
    """Sync ``root`` into ``state`` in a child that SIGKILLs itself at a step; its exit code.

    ``target``: the step (``upsert``, ``delete``, ``set_payload``, ``add_pending_many``,
    ``commit_documents``); ``when``: ``before`` or ``after`` its ``nth`` call.
    """
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD.format(repo=str(REPO)),
            str(root),
            str(state),
            target,
            when,
            str(nth),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode


def _edit(root: Path) -> None:
    g = root / "docs/concepts/glossary.md"
    g.write_text(g.read_text().replace("## Aggregation", "## Aggregation\n\nEdited.", 1))
    os.rename(root / "docs/collector/quick-start.md", root / "docs/quick-start.md")
    (root / "docs/collector/architecture.md").unlink()
    (root / "docs/new.md").write_text("# New\n\nA new page.\n")


@pytest.mark.parametrize(
    ("target", "when", "nth"),
    [
        ("add_pending_many", "after", 1),
        ("add_pending_many", "after", 3),
        ("upsert", "before", 1),
        ("upsert", "after", 2),
        ("delete", "after", 1),
        ("set_payload", "after", 1),
        ("commit_documents", "before", 2),
        ("commit_documents", "after", 3),
    ],
)
def test_killed_sync_is_repaired_by_the_next(
    tmp_path: Path, target: str, when: str, nth: int
) -> None:
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    if target in ("delete", "set_payload"):
        # these steps only happen on an update: ingest first, then edit and crash
        eng = make_engine(root, state, fake_vectors)
        eng.sync(next(iter(eng.context.sources)))
        eng.close()
        _edit(root)
    code = run_killed_sync(root, state, target, when, nth)
    assert code == -signal.SIGKILL, f"the child was not killed at {target}/{when}/{nth}"
    if target not in ("delete", "set_payload"):
        _edit(root)  # the tree also moves on while the daemon is down
    eng = make_engine(root, state, fake_vectors)
    name = next(iter(eng.context.sources))
    eng.sync(name)
    report = eng.verify(name)
    eng.close()
    assert report.clean, report.as_dict()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


@pytest.mark.slow
def test_sigkill_real_resync_process_then_resync_verifies_clean(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ingestd.daemon", "resync", "--state-dir", str(state), str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    db = state / "manifest.db"

    def pending_ids() -> int:
        if not db.exists():
            return 0
        try:
            with sqlite3.connect(db, timeout=1) as conn:
                return int(conn.execute("SELECT count(*) FROM chunks WHERE pending").fetchone()[0])
        except sqlite3.Error:
            return 0

    try:
        # pending ids are recorded before the batch is embedded: kill in the middle of it
        wait_for(
            lambda: pending_ids() > 0 or proc.poll() is not None,
            240,
            "pending point ids of the first batch",
        )
        assert proc.poll() is None, "resync finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert pending_ids() > 0
    again = run_cli("resync", "--state-dir", str(state), str(root), timeout=300)
    assert again.returncode == 0, again.stderr
    verify = run_cli("verify", "--state-dir", str(state), str(root), timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
