"""Damage that cannot be healed in place stops ``ingestd run`` with the line naming its fix.

Before: a payload page of an Edge segment cut to 4 KiB gave a daemon that said "in sync"
and was healthy, then lost an edit with two ERROR lines; a damaged ``segment.json`` or
shard config made ``run`` retry forever, a traceback each time. Now the daemon opens its
collections at start-up and checks its store point by point; damage found then, or by any
later job, ends the daemon with exit status 1 and one line that names
``ingestd resync --rebuild`` (systemd's restart limits then apply), and that command
brings back a store equal to a from-scratch ingest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    REPO,
    assert_matches_oracle,
    edge_shard,
    fake_vectors,
    ingested_tree,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.engine("edge")]


def _fakecli(*args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.faults.fakecli", *args],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def _cut_payload_page(state: Path) -> None:
    page = max(
        edge_shard(state).glob("segments/*/payload_storage/page_*.dat"),
        key=lambda p: p.stat().st_size,
    )
    with page.open("r+b") as f:
        f.truncate(4096)


def _break_segment_json(state: Path) -> None:
    (seg,) = list(edge_shard(state).glob("segments/*/segment.json"))[:1]
    seg.write_text('{"version": 12, "config": ')


def _break_shard_config(state: Path) -> None:
    (edge_shard(state) / "edge_config.json").write_text("{not json")


@pytest.mark.parametrize(
    "damage",
    [_cut_payload_page, _break_segment_json, _break_shard_config],
    ids=lambda f: f.__name__[1:],
)
def test_run_stops_with_the_line_that_names_the_fix_then_rebuild_heals(
    tmp_path: Path, damage: Any
) -> None:
    root, state = ingested_tree(tmp_path)
    damage(state)
    page = root / "docs/concepts/glossary.md"
    page.write_text(page.read_text() + "\n\nAn edit made while the store is damaged.\n")
    run = _fakecli("run", "--state-dir", str(state), str(root))
    try:
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, err[-3000:]
    assert "is damaged" in err and "ingestd resync --rebuild" in err, err[-3000:]
    assert err.count("Traceback") == 0, err[-3000:]
    assert "in sync" not in err
    # the documented recovery
    rebuild = _fakecli("resync", "--rebuild", "--state-dir", str(state), str(root))
    out, err = rebuild.communicate(timeout=300)
    assert rebuild.returncode == 0, err[-3000:]
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


class _DamagedOnSearch:
    """A store whose searches meet damage (a page the start-up check did not read)."""

    def __init__(self, inner: Any, state: Path) -> None:
        self.inner = inner
        self.state = state

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def search(self, collection: str, **kw: Any) -> Any:
        from ingestd.store.common.damage import StateDamagedError

        raise StateDamagedError(self.state / "edge", "vector store", "search: IO error")


def test_damage_met_by_a_running_daemon_answers_its_line_and_stops_it(tmp_path: Path) -> None:
    """A search through the daemon meets damage: the client gets the one line, the daemon stops.

    (Cutting a file the running engine has mapped cannot be shown for real: the kernel
    kills the process with SIGBUS when it touches the missing pages.)
    """
    from ingestd.daemon.client import Client
    from ingestd.daemon.errors import DaemonError
    from tests.daemon.harness import Harness
    from tests.helpers import CountingEmbedder, open_state_store

    root, state = ingested_tree(tmp_path)

    def damaged(state_dir: Path) -> Any:
        return _DamagedOnSearch(open_state_store(state_dir), state_dir)

    h = Harness(root, state, CountingEmbedder(fake_vectors), store_factory=damaged).start()
    with pytest.raises(DaemonError) as err:
        Client(state, local=False).search("what is a span", mode="sparse")
    assert err.value.exit_code == 1
    assert "is damaged" in str(err.value) and "ingestd resync --rebuild" in str(err.value)
    wait_for(lambda: not h.alive, 30, "the daemon to stop")
    assert h.stop() == 1


class _Refusing:
    """A store that refuses (``ValueError``) to write points of ``path`` while ``refuse``."""

    def __init__(self, inner: Any, path: str) -> None:
        self.inner = inner
        self.path = path
        self.refuse = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def upsert(self, collection: str, points: list[Any]) -> None:
        if self.refuse and any(p.payload["path"] == self.path for p in points):
            raise ValueError(f"payload of {self.path} rejected")
        self.inner.upsert(collection, points)


def test_a_write_the_store_refuses_makes_the_daemon_unhealthy_until_it_is_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.daemon.harness import Harness
    from tests.helpers import CountingEmbedder, open_state_store

    root, state = ingested_tree(tmp_path)
    page = "docs/concepts/glossary.md"
    stores: list[_Refusing] = []

    def refusing(state_dir: Path) -> Any:
        stores.append(_Refusing(open_state_store(state_dir), page))
        return stores[-1]

    with Harness(root, state, CountingEmbedder(fake_vectors), store_factory=refusing) as h:
        b = h.service.batches_done
        (root / page).write_text((root / page).read_text() + "\n\nA paragraph refused.\n")
        wait_for(lambda: h.service.batches_done > b, 30, "the edit to be tried")
        h.wait_idle()
        st = h.service.status()
        assert not st["daemon"]["healthy"]
        assert any("refused to write 1 document" in p for p in st["daemon"]["problems"])
        (src,) = st["sources"]
        assert src["refused"][0]["path"] == page and "rejected" in src["refused"][0]["error"]
        # the store accepts it again: the next write of the document heals the daemon
        stores[-1].refuse = False
        b = h.service.batches_done
        (root / page).write_text((root / page).read_text() + "\nAnd accepted.\n")
        h.settle(b)
        assert h.service.status()["daemon"]["healthy"]
