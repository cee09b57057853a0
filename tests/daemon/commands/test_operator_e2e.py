"""Operators' commands against ``ingestd run`` with the real model, as an operator types them.

The in-process cases (``test_operator_commands.py``) cover each item with fake vectors;
this one runs the installed console script twice on one state dir, and every command
is a subprocess reaching the daemon through its control socket: ``forget`` of a watched
source, a source's volume unmounted and mounted again, deletions held at start-up by
the mass-deletion guard that end when a checkout brings the files back, and a page that
a ``.gitignore`` then leaves out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from tests.helpers import (
    copy_tree,
    fake_vectors,
    run_cli,
    start_ingestd_run,
    store_snapshot,
    without_provenance,
)
from tests.helpers import wait_for as _wait_for

pytestmark = pytest.mark.slow

PAGES = ("docs/concepts/glossary.md", "docs/collector/deploy/gateway.md")


def _git(root: Path, *args: str) -> None:
    cmd = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*cmd, *args], check=True, capture_output=True)


def _status(common: list[str]) -> tuple[int, dict[str, Any]]:
    proc = run_cli("status", *common, "--json", timeout=60)
    return proc.returncode, json.loads(proc.stdout or "{}")


def _source(common: list[str], name: str) -> dict[str, Any]:
    _, st = _status(common)
    return dict(next(s for s in st["sources"] if s["source"] == name))


def _assert_matches_oracle(cfg: Path, state: Path, tmp: Path) -> None:
    """The store holds exactly a from-scratch ingest of every configured source."""
    fresh = tmp / "oracle"
    eng = Engine(load_config(cfg), fresh, embed_model=fake_vectors)
    try:
        for name in eng.context.sources:
            eng.sync(name)
    finally:
        eng.close()
    want = without_provenance(store_snapshot(fresh))
    got = without_provenance(store_snapshot(state))
    assert set(got) == set(want), (
        f"{len(set(want) - set(got))} missing, {len(set(got) - set(want))} orphans"
    )
    assert [pid for pid in want if got[pid] != want[pid]] == []


@contextmanager
def _daemon(cfg: Path, state: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``ingestd run --config cfg`` until its first reconcile is done; SIGTERM at the end."""
    proc = start_ingestd_run(cfg, state, log, {**os.environ, "INGESTD_STATE_DIR": ""})
    common = ["--state-dir", str(state)]
    try:
        _wait_for(
            lambda: (
                (state / "control-socket").exists()
                and (_status(common)[1].get("daemon") or {}).get("phase") == "watching"
            ),
            240,
            "the first reconcile",
        )
        yield proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_operators_commands_agree_with_a_running_daemon(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    for i in range(30):
        (repo / "docs" / f"page{i:02}.md").write_text(f"# Page {i}\n\nNotes on harbour {i}.\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "thirty pages")
    _git(repo, "checkout", "-q", "-b", "slim")
    _git(repo, "rm", "-q", *[f"docs/page{i:02}.md" for i in range(3, 30)])
    _git(repo, "commit", "-q", "-m", "three pages")
    _git(repo, "checkout", "-q", "main")
    vol = copy_tree(tmp_path / "vol" / "docs", PAGES)
    cfg = tmp_path / "ingestd.yaml"
    cfg.write_text(
        f"sources:\n  - name: repo\n    root: {repo}\n  - name: docs\n    root: {vol}\n"
        "watch:\n  unwatched_rescan_s: 5\n"  # a missing root is looked for every 5 s
    )
    state, log = tmp_path / "state", tmp_path / "daemon.log"
    common = ["--state-dir", str(state)]
    with_cfg = ["--config", str(cfg), *common]

    with _daemon(cfg, state, log):
        n_docs = _source(common, "docs")["documents"]
        assert n_docs == len(PAGES)
        # forget of a watched source: refused, nothing deleted
        res = run_cli("forget", *common, "docs")
        assert res.returncode == 2, res.stdout + res.stderr
        assert "configured in the running daemon" in res.stdout + res.stderr
        assert _source(common, "docs")["documents"] == n_docs

        # the volume is unmounted: a state every command reports, never a config error
        vol.rename(tmp_path / "vol" / "elsewhere")
        _wait_for(lambda: _status(with_cfg)[0] == 1, 30, "status to turn unhealthy")
        st = run_cli("status", *with_cfg)
        assert "invalid configuration" not in st.stdout + st.stderr
        assert "missing root" in st.stdout, st.stdout
        res = run_cli("resync", *with_cfg, timeout=120)
        assert res.returncode == 1 and "nothing synced or deleted" in res.stdout + res.stderr
        res = run_cli("verify", *with_cfg, "--repair", timeout=120)
        assert res.returncode == 1 and "ROOT MISSING" in res.stdout + res.stderr
        hits = run_cli("search", *with_cfg, "--json", "-k", "5", "collector gateway deployment")
        assert hits.returncode == 0, hits.stderr
        assert "docs/collector/deploy/gateway.md" in {h["path"] for h in json.loads(hits.stdout)}
        assert _source(common, "docs")["documents"] == n_docs
        (tmp_path / "vol" / "elsewhere").rename(vol)  # mounted again
        _wait_for(lambda: _status(with_cfg)[0] == 0, 90, "status to turn healthy")
        assert run_cli("verify", *with_cfg, timeout=120).returncode == 0

    _git(repo, "checkout", "-q", "slim")  # 27 pages gone while the daemon is stopped
    with _daemon(cfg, state, log):
        assert _source(common, "repo")["held_deletes"] == 27  # held by the start-up scan
        _git(repo, "checkout", "-q", "main")  # and back
        _wait_for(
            lambda: _source(common, "repo")["held_deletes"] == 0,
            30,
            "the held deletions to end",
        )
        assert _source(common, "repo")["documents"] == 30
        _wait_for(lambda: _status(with_cfg)[0] == 0, 60, "a healthy daemon")
        res = run_cli("verify", *with_cfg, "--json", timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr

        # an indexed page that a .gitignore now leaves out is deleted, though still on disk
        (repo / "docs" / ".gitignore").write_text("page00.md\n")
        _wait_for(
            lambda: _source(common, "repo")["documents"] == 29, 60, "the ignored page's deletion"
        )
        hits = run_cli("search", *with_cfg, "--json", "-k", "10", "notes on harbour 0")
        assert hits.returncode == 0, hits.stderr
        assert "docs/page00.md" not in {h["path"] for h in json.loads(hits.stdout)}
        assert run_cli("verify", *with_cfg, timeout=120).returncode == 0

    assert "Traceback" not in log.read_text()
    _assert_matches_oracle(cfg, state, tmp_path)
