"""A search with nothing to search says "nothing indexed" (exit 1), never "no results".

Per searched source: a site whose fetch failed, a folder whose root is missing, a
source never synced holds nothing, and a search of such sources alone exits 1 with each
one's reason (it printed "no results" and exited 0 when the state dir held another
source). A state dir with nothing at all names the ``resync`` to run as the command was
called: with its config, its ``PATH`` arguments, its state dir (it always said
``ingestd resync PATH``, which a config's user does not run, into the default state dir).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.daemon.client import Client
from ingestd.daemon.wire.errors import DaemonError
from tests.daemon.sources.sitemap.site import Site
from tests.helpers import ingested_tree


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def test_sources_that_hold_nothing_say_nothing_indexed_and_why(tmp_path: Path) -> None:
    root, state = ingested_tree(tmp_path)  # a folder holding documents
    gone = tmp_path / "unmounted"
    config = tmp_path / "c.yaml"
    common = ("--config", str(config), "--mode", "sparse")
    with Site() as site:
        site.failing = 503
        config.write_text(
            f"state_dir: {state}\nsources:\n  - {{root: {root}}}\n"
            f"  - {{kind: sitemap, name: site, url: '{site.base}/sitemap.xml'}}\n"
            f"  - {{root: {gone}, name: gone}}\n"
        )
        code, out = _run("search", *common, "--source", "site", "collector")
        assert code == 1, out  # configured, never tried
        assert "nothing indexed in source site: not fetched yet; see `ingestd status`" in out
        code, out = _run("sync", "site", "--config", str(config))
        assert code == 1, out  # one failed fetch
    code, out = _run("search", *common, "--source", "site", "collector")
    assert code == 1, out
    assert "nothing indexed in source site: its fetch failed (" in out and "503" in out, out
    code, out = _run("search", *common, "--source", "gone", "collector")
    assert code == 1, out
    assert f"nothing indexed in source gone: its root {gone} is not a folder" in out
    with pytest.raises(DaemonError) as err:  # the Python API (and the MCP tool) alike
        Client(state, config=config).search("collector", source="site", mode="sparse")
    assert err.value.exit_code == 1 and "its fetch failed" in str(err.value)
    # a source holding documents among those searched: its answer, or "no results"
    code, out = _run("search", *common, "collector")
    assert code == 0 and "1. " in out, out
    code, out = _run("search", *common, "zqxjvw")
    assert code == 0 and "no results" in out, out


def test_the_hint_to_index_follows_how_the_command_was_called(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    config = tmp_path / "never-synced.yaml"
    config.write_text(f"state_dir: {empty}\nsources:\n  - {{root: {tmp_path}}}\n")
    code, out = _run("search", "--config", str(config), "x")
    assert code == 1, out
    assert f"nothing indexed in {empty}: run `ingestd resync --config {config}` first" in out
    code, out = _run("search", "--state-dir", str(empty), "x")
    assert code == 1, out
    assert f"run `ingestd resync --state-dir {empty} PATH` first" in out
    code, out = _run("verify", "--state-dir", str(empty), str(tmp_path))
    assert code == 1, out
    assert f"run `ingestd resync --state-dir {empty} {tmp_path}` first" in out
    code, out = _run("read", "--config", str(config), "--state-dir", str(empty), "--path", "a")
    assert code == 1, out
    assert f"run `ingestd resync --config {config} --state-dir {empty}` first" in out
    with pytest.raises(DaemonError) as err:  # the Python API: it raised FileNotFoundError
        Client(config=config).search("x", mode="sparse")
    assert err.value.exit_code == 1
    assert (
        str(err.value)
        == f"nothing indexed in {empty}: run `ingestd resync --config {config}` first"
    )
