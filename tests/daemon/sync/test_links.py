"""The hard links of documents: which other names a change of one name reaches, once.

The last test runs ``ingestd run`` with the real model and asks it with the CLI, as an
operator would; the in-process cases with the running service are in
``test_operator_commands.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.sources.local import LocalFolder, LocalSourceConfig
from ingestd.daemon.sources.walk import stat_file
from ingestd.daemon.sync.planning.links import HardLinks
from tests.helpers import assert_matches_oracle, fake_vectors, ingestd_cmd, run_cli, wait_for


def _folder(source: str, root: Path) -> LocalFolder:
    return LocalFolder(LocalSourceConfig(name=source, root=root))


def _seen(links: HardLinks, source: str, root: Path, *rels: str) -> None:
    found = {r: st for r in rels if (st := stat_file(root / r)) is not None}
    links.observe(_folder(source, root), found, None)


def test_a_change_reaches_the_other_names_of_its_inode_once(tmp_path: Path) -> None:
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    a_root.mkdir()
    b_root.mkdir()
    (a_root / "one.md").write_text("first\n")
    os.link(a_root / "one.md", a_root / "two.md")
    os.link(a_root / "one.md", b_root / "three.md")  # in another source
    (a_root / "alone.md").write_text("one name\n")
    links = HardLinks()
    _seen(links, "a", a_root, "one.md", "two.md", "alone.md")
    _seen(links, "b", b_root, "three.md")
    assert links.siblings("a", {"one.md"}) == {}  # nothing changed yet
    with (a_root / "one.md").open("a") as f:
        f.write("appended\n")
    assert links.siblings("a", {"one.md"}) == {"a": {"two.md"}, "b": {"three.md"}}
    # the batch of source b that follows hands nothing back to source a
    _seen(links, "a", a_root, "one.md", "two.md", "alone.md")
    assert links.siblings("b", {"three.md"}) == {}
    assert links.changed() == {}


def test_a_write_through_a_name_outside_the_root_is_found_by_the_stat_check(
    tmp_path: Path,
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    outside = tmp_path / "x.md"
    outside.write_text("outside\n")
    os.link(outside, root / "x.md")
    links = HardLinks()
    _seen(links, "docs", root, "x.md")
    assert links.changed() == {}
    with outside.open("a") as f:
        f.write("more\n")
    assert links.changed() == {"docs": {"x.md"}}
    assert links.changed() == {}  # handed out once
    (root / "x.md").unlink()
    assert links.changed() == {"docs": {"x.md"}}  # a deletion is a change too
    assert links.changed() == {}


def test_a_name_linked_later_reports_its_inode_once_and_its_indexed_names_join(
    tmp_path: Path,
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "c.md").write_text("one name when indexed\n")
    indexed = stat_file(root / "c.md")
    assert indexed is not None and indexed.nlink == 1
    links = HardLinks()
    assert (
        links.observe(_folder("docs", root), {"c.md": indexed}, None) == set()
    )  # one link: not kept
    os.link(root / "c.md", root / "d.md")
    d = stat_file(root / "d.md")
    assert d is not None
    assert links.observe(_folder("docs", root), {"d.md": d}, ["d.md"]) == {d.inode}  # a new inode
    assert links.observe(_folder("docs", root), {"d.md": d}, ["d.md"]) == set()  # known now
    links.track(_folder("docs", root), {"c.md": indexed})  # as the manifest records it
    with (root / "d.md").open("a") as f:
        f.write("appended through d.md\n")
    assert links.siblings("docs", {"d.md"}) == {"docs": {"c.md"}}


def _search(state: Path, query: str) -> list[dict[str, Any]]:
    proc = run_cli("search", "--state-dir", str(state), "--json", "-k", "10", query, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def _paths_saying(state: Path, words: str) -> set[str]:
    return {h["path"] for h in _search(state, words) if words in h["text"]}


@pytest.mark.slow
def test_run_indexes_every_name_of_a_file_written_through_one(tmp_path: Path) -> None:
    """``ingestd run`` (real model, default watch settings): an append to ``docs/a.md``
    reaches its link ``docs/b.md``, and one to a file outside the root its link
    ``docs/x.md``, searchable within seconds; ``verify`` is clean, no rescan needed."""
    root, outside = tmp_path / "docs", tmp_path / "elsewhere"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    a = root / "docs/a.md"
    a.write_text("# Lighthouses\n\nA lighthouse guides ships along the coast at night.\n")
    os.link(a, root / "docs/b.md")
    x = outside / "x.md"
    x.write_text("# Volcanoes\n\nA volcano vents molten rock from below the crust.\n")
    os.link(x, root / "docs/x.md")
    state = tmp_path / "state"
    log = (tmp_path / "daemon.log").open("w")
    env = {**os.environ, "INGESTD_STATE_DIR": ""}
    proc = subprocess.Popen(
        [*ingestd_cmd(), "run", "--state-dir", str(state), str(root)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:

        def watching() -> bool:
            st = run_cli("status", "--state-dir", str(state), "--json", timeout=60)
            return (
                st.returncode == 0
                and (json.loads(st.stdout)["daemon"] or {}).get("phase") == "watching"
            )

        wait_for(watching, 240, "the first reconcile")
        with a.open("a") as f:
            f.write("\nZebra crossings are painted near the harbour lighthouse.\n")
        with x.open("a") as f:
            f.write("\nPenguins nest on the cooled lava fields of the volcano.\n")
        t0 = time.monotonic()
        wait_for(
            lambda: _paths_saying(state, "Zebra crossings") == {"docs/a.md", "docs/b.md"},
            10,
            "the append to a.md under both names",
        )
        wait_for(
            lambda: _paths_saying(state, "Penguins nest") == {"docs/x.md"},
            15,
            "the append outside the root under docs/x.md",
        )
        assert time.monotonic() - t0 < 15
        verify = run_cli("verify", "--state-dir", str(state), "--json", timeout=120)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert json.loads(verify.stdout)["clean"] is True
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    assert "Traceback" not in (tmp_path / "daemon.log").read_text()
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
