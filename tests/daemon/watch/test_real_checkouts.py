"""Real checkouts settle: a tree with a huge ``node_modules/`` and ``.venv/`` inside.

The bug this pins (issue 20): on a checkout whose ignored ``.venv/`` held 4,218 of its
4,256 folders, ``ingestd run`` never finished its first reconcile. watchdog's
recursive watch set a watch on every folder with a mask that included ``IN_OPEN`` and
``IN_CLOSE_NOWRITE``, so walking the tree (watchdog's own set-up, ingestd's rescan)
overflowed the event queue, which made both walk it again: 531 overflows a minute and
more than a core of CPU on an idle daemon. Now only folders that can hold documents
are watched, with a mask that readers do not trigger.

Both tests run the real ``ingestd run`` process with the real model. The big tree
(20,000 folders, 100,000 files) is made once, on tmpfs (deleting 100,000 files on the
test machines' disk takes minutes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon.checkouts import Checkout, Daemon, cpu_seconds, inotify_watches, make_checkout
from tests.daemon.harness import fast_tmp
from tests.helpers import REPO, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="needs Linux /proc"),
]

#: Watches allowed beyond the folders that can hold documents.
SPARE_WATCHES = 3
IDLE_S = 20.0


@pytest.fixture(scope="module")
def big_checkout() -> Iterator[Checkout]:
    with fast_tmp("checkout-") as d:
        yield make_checkout(d / "site", heavy_folders=20_000, files_per_folder=5)


@pytest.mark.timeout(900)
def test_a_checkout_with_huge_ignored_trees_settles_and_stays_idle(
    big_checkout: Checkout, tmp_path: Path
) -> None:
    co = big_checkout
    assert co.heavy_folders >= 20_000 and co.heavy_files >= 100_000 and len(co.docs) == 50
    with fast_tmp("state-") as state:
        daemon = Daemon([str(co.root)], state / "state", tmp_path / "daemon.log")
        try:
            took = daemon.wait_reconciled(timeout=400)
            st = daemon.status()
            (src,) = st["sources"]
            assert src["documents"] == 50, src
            # the watches it holds are the folders that can hold documents, no more
            held = inotify_watches(daemon.pid)
            assert held <= co.doc_folders + SPARE_WATCHES, (held, co.doc_folders)
            assert src["watched_folders"] == co.doc_folders
            assert src["ignored_folders"] == 4  # node_modules, .venv, .git, src/__pycache__
            wait_for(lambda: daemon.daemon_status().get("model_loaded"), 300, "the model", 1.0)

            # idle for 20 s: no overflow, no scan, (almost) no CPU (the watchdog observer
            # before it spent 19.7 CPU s per idle minute on such a tree)
            cpu0, t0 = cpu_seconds(daemon.pid), time.monotonic()
            while time.monotonic() - t0 < IDLE_S:
                d = daemon.daemon_status()
                assert d.get("overflows") == 0 and d.get("healthy"), d
                assert "overflow" not in daemon.log_text()
                time.sleep(2)  # sampling period of a 20 s observation
            idle_cpu = cpu_seconds(daemon.pid) - cpu0
            assert idle_cpu < 2.0, f"{idle_cpu:.1f} CPU s in {IDLE_S:.0f} s of idling"

            # 1,000 files created in node_modules: not one event, so no sync
            before = daemon.status()
            events, batches = before["sources"][0]["watch_events"], before["daemon"]["batches_done"]
            pkg = co.root / "node_modules/pkg-new"
            pkg.mkdir()
            for i in range(1000):
                (pkg / f"m{i}.md").write_text("# not a document of ours\n")
            (co.root / "docs/marker.png").write_bytes(b"\x89PNG")  # 2 events, no document
            wait_for(
                lambda: daemon.status()["sources"][0]["watch_events"] >= events + 2,
                30,
                "the marker's events",
            )
            after = daemon.status()
            new_events = after["sources"][0]["watch_events"] - events
            assert new_events == 2, new_events
            assert after["daemon"]["batches_done"] == batches

            # an edit of a document is searchable within seconds
            page = co.root / co.docs[7]
            page.write_text(page.read_text() + "\nZebra crossings need striped paint.\n")
            t_edit = time.monotonic()
            wait_for(
                lambda: any(
                    h["path"] == co.docs[7] and "Zebra" in h["text"]
                    for h in daemon.search("zebra crossings striped paint")
                ),
                30,
                "the edit in search",
                interval=0.2,
            )
            edit_s = time.monotonic() - t_edit
            final = daemon.status()
            assert final["daemon"]["overflows"] == 0 and final["daemon"]["healthy"]
            print(
                f"\nfirst reconcile {took:.1f} s, {held} watches for {co.doc_folders} folders "
                f"({co.heavy_folders} ignored), idle CPU {idle_cpu:.2f} s / {IDLE_S:.0f} s, "
                f"{final['daemon']['overflows']} overflows, 1,000 files in node_modules: "
                f"{new_events} events (the marker's), 0 batches; "
                f"edit searchable after {edit_s:.1f} s"
            )
        finally:
            code = daemon.stop()
        assert code == 0, daemon.log_text()[-3000:]
        assert "Traceback" not in daemon.log_text()


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.mark.timeout(1500)
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_readme_quick_start_on_a_clone_with_its_virtualenv(tmp_path: Path) -> None:
    """``ingestd run .`` from the root of a clone that holds a real ``.venv``."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    with fast_tmp("clone-") as d:
        clone = d / "ingestd"
        _git("clone", "-q", "--no-hardlinks", str(REPO), str(clone))
        venv = subprocess.run(
            [sys.executable, "-m", "venv", str(clone / ".venv")], capture_output=True, text=True
        )
        if venv.returncode != 0:
            pytest.skip(f"python -m venv failed: {venv.stderr.strip()[-300:]}")
        venv_folders = sum(len(dirs) for _, dirs, _ in os.walk(clone / ".venv"))
        home = d / "home"
        env = {"XDG_STATE_HOME": str(home / ".local/state"), "HOME": str(home)}
        # the quick start, with the package already installed: `ingestd run .`
        daemon = Daemon(["."], None, tmp_path / "daemon.log", cwd=clone, env=env)
        try:
            # the model embeds ~300 chunks of the README and docs/: minutes on 2 shared cores
            took = daemon.wait_reconciled(timeout=1200)
            # `ingestd status && ingestd search "how do I install and run ingestd"`
            st = daemon.cli("status")
            assert st.returncode == 0, st.stdout + st.stderr

            # a long page is written in the background after the reconcile, in slices
            # that search cannot see until the whole document is committed
            def readme_hits() -> list[str] | None:
                paths = [h["path"] for h in daemon.search("how do I install and run ingestd")]
                return paths if "README.md" in paths else None

            wait_for(readme_hits, 1200, "README.md in the quick start's search", interval=2)
            d_st = daemon.daemon_status()
            assert d_st["overflows"] == 0 and d_st["healthy"]
            assert inotify_watches(daemon.pid) < 100 < venv_folders
            print(f"\n{venv_folders} folders in .venv; first reconcile {took:.1f} s")
        finally:
            code = daemon.stop()
        assert code == 0, daemon.log_text()[-3000:]
        assert (home / ".local/state/ingestd").is_dir()  # where the README says
