"""The table of embedded engines: one entry is all the rest of ingestd reads.

Before, what an engine is (its folder, how it is chosen and opened, its damage, its disk
cost) was spelled in a dozen modules, ``edge`` and ``local`` in four of them. These
tests add a third engine (``memory``, ``tests/fake_engine.py``) through the table alone
and check that config validation, the state dir, engine choice, damage reports and the
command line take it up; the store and sync suites run on it too (``tests/conftest.py``).
They also pin the true disk size of a store with sparse files.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.daemon.config import ConfigError, load_config
from ingestd.daemon.statedir import StatePaths, state_dir_bytes
from ingestd.store.vectors.engines import (
    choose_engine,
    engine_names,
    engine_spec,
    files_damage,
    open_embedded,
)
from ingestd.store.vectors.spec import EngineSpec, allocated_bytes
from tests.helpers import QdrantVersionStub, copy_tree, fake_vectors, make_engine

pytestmark = pytest.mark.engine("edge")  # the table itself: once


def test_each_entry_is_the_spec_of_its_name() -> None:
    assert engine_names() == ("edge", "local")
    for name in engine_names():
        spec = engine_spec(name)
        assert isinstance(spec, EngineSpec) and spec.name == name
    assert [engine_spec(n).folder for n in engine_names()] == ["edge", "qdrant"]
    with pytest.raises(
        ValueError, match="unknown embedded engine 'nope'; expected one of: edge, local"
    ):
        engine_spec("nope")


def test_reading_every_spec_imports_no_engine() -> None:
    probe = (
        "import sys\n"
        "from ingestd.store.vectors.engines import engine_specs\n"
        "from ingestd.daemon.statedir import StatePaths\n"
        "specs = engine_specs()\n"
        "StatePaths(__import__('pathlib').Path('/nowhere')).engine_folders()\n"
        "print(','.join(m for m in ('qdrant_client', 'qdrant_edge', 'numpy', 'pydantic')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""


def test_config_accepts_the_table_names_and_lists_them(
    monkeypatch: pytest.MonkeyPatch, memory_engine: str
) -> None:
    assert load_config(None, overrides={"qdrant": {"engine": "memory"}}).qdrant.engine == "memory"
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides={"qdrant": {"engine": "nope"}})
    assert str(err.value) == (
        "qdrant.engine: Input should be 'edge', 'local' or 'memory' (got 'nope')"
    )
    monkeypatch.setenv("INGESTD_QDRANT_ENGINE", "nope")
    with pytest.raises(ConfigError, match=r"INGESTD_QDRANT_ENGINE: expected edge, local or memory"):
        load_config(None)
    monkeypatch.setenv("INGESTD_QDRANT_ENGINE", "memory")
    assert load_config(None).qdrant.engine == "memory"


def test_the_error_lists_the_two_engines_as_before() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides={"qdrant": {"engine": "nope"}})
    assert str(err.value) == "qdrant.engine: Input should be 'edge' or 'local' (got 'nope')"


def test_state_paths_take_each_folder_from_the_table_and_the_config(
    tmp_path: Path, memory_engine: str
) -> None:
    paths = StatePaths(tmp_path)
    assert paths.engine_folders() == {
        "edge": tmp_path / "edge",
        "local": tmp_path / "qdrant",
        "memory": tmp_path / "memory",
    }
    moved = tmp_path / "elsewhere"
    cfg = load_config(None, overrides={"qdrant": {"path": str(moved)}})
    assert cfg.paths(tmp_path).engine_folder("local") == moved
    assert cfg.paths(tmp_path).engine_folder("edge") == tmp_path / "edge"


def test_the_engine_holding_a_store_is_kept_and_a_new_one_is_the_first_installed(
    tmp_path: Path, memory_engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folders = StatePaths(tmp_path).engine_folders()
    assert choose_engine(None, folders) == ("edge", None)
    monkeypatch.setattr(type(engine_spec("edge")), "installed", lambda self: False)
    assert choose_engine(None, folders) == ("local", None)
    store = open_embedded("memory", folders)
    store.ensure_collection("c", 4)
    store.close()
    assert (tmp_path / "memory" / "memory.json").is_file()
    assert choose_engine(None, folders) == ("memory", None)  # held: kept
    assert choose_engine("edge", folders) == ("edge", "memory")  # its collections move


def test_the_third_engine_is_synced_searched_and_checked_through_the_table(
    tmp_path: Path, memory_engine: str
) -> None:
    tree = copy_tree(tmp_path / "docs", ["docs/concepts/glossary.md"])
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_vectors, qdrant={"engine": "memory"})
    try:
        assert eng.sync(next(iter(eng.context.sources))).indexed == 1
        assert (
            eng.resources.store.engine == "memory"
            and eng.resources.store.layout("ingestd").engine == "memory"
        )
    finally:
        eng.close()
    assert not (state / "edge").exists() and not (state / "qdrant").exists()
    folders = StatePaths(state).engine_folders()
    assert files_damage(folders) is None
    (state / "memory" / "memory.json").write_text('{"aliases": ')
    damage = files_damage(folders)
    assert damage is not None and damage.path == state / "memory" / "memory.json"
    res = CliRunner().invoke(
        cli,
        ["status", "--state-dir", str(state)],
    )
    assert res.exit_code == 1 and "memory.json is damaged" in res.output


def test_a_sparse_file_costs_its_allocated_blocks(tmp_path: Path) -> None:
    """``status --json`` said 205 MB for an Edge store that took 4.5 MB of disk."""
    tree = copy_tree(tmp_path / "docs", ["docs/concepts/glossary.md"])
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_vectors)
    try:
        eng.sync(next(iter(eng.context.sources)))
    finally:
        eng.close()
    before = state_dir_bytes(state)
    sparse = state / "edge" / "collections" / "ingestd__v1" / "mapped.dat"
    with sparse.open("wb") as f:
        f.truncate(200_000_000)  # a hole: no block allocated
        f.write(b"x")
    assert sparse.stat().st_size == 200_000_000
    assert allocated_bytes(sparse) <= 64 * 1024
    assert 0 < before <= state_dir_bytes(state) <= before + 64 * 1024
    res = CliRunner().invoke(
        cli,
        ["status", "--state-dir", str(state), "--json"],
    )
    assert res.exit_code == 0, res.output
    disk = json.loads(res.stdout)["disk"]
    assert disk["state_dir_bytes"] < 50_000_000
    manifest = sum(os.stat(p).st_size for p in state.glob("manifest.db*"))
    assert disk["state_dir_bytes"] >= manifest  # files outside the engines count their size


def test_an_engine_not_installed_says_how_to_install_it(
    tmp_path: Path, memory_engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingestd.store.vectors.base import StoreUnavailableError

    monkeypatch.setattr(type(engine_spec("memory")), "installed", lambda self: False)
    with pytest.raises(StoreUnavailableError, match=r"engine is memory .*nothing to install"):
        open_embedded("memory", StatePaths(tmp_path).engine_folders())


@pytest.mark.parametrize("where", ["url", "path"])
def test_without_qdrant_client_a_server_and_the_local_engine_name_its_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    from ingestd.store.vectors.base import QDRANT_CLIENT_EXTRA, StoreUnavailableError
    from ingestd.store.vectors.client.qdrant import QdrantStore

    monkeypatch.setitem(sys.modules, "qdrant_client", None)  # import fails: not installed
    where_to = {"url": "http://127.0.0.1:9"} if where == "url" else {"path": str(tmp_path)}
    with pytest.raises(StoreUnavailableError) as err:
        QdrantStore(**where_to, engine=where)
    assert QDRANT_CLIENT_EXTRA in str(err.value) and "\n" not in str(err.value)
    assert "'ingestd[qdrant-client]'" in engine_spec("local").install_hint


def test_rebuild_moves_a_damaged_store_of_any_engine_aside(
    tmp_path: Path, memory_engine: str
) -> None:
    from ingestd.daemon.sync.state.damage import set_aside_damaged

    cfg = load_config(None, overrides={"qdrant": {"engine": "memory"}})
    store = open_embedded("memory", cfg.paths(tmp_path).engine_folders())
    store.ensure_collection("c", 4)
    store.close()
    assert set_aside_damaged(cfg, tmp_path) == []
    (tmp_path / "memory" / "collections" / "c__v1" / "points.json").write_text("{")
    (note,) = set_aside_damaged(cfg, tmp_path)
    assert "points.json is damaged" in note and "moved aside" in note
    assert not (tmp_path / "memory").exists()
    assert len(list(tmp_path.glob("memory.damaged-*"))) == 1


@pytest.fixture
def other_server() -> Iterator[str]:
    """The second server engine (``tests.fake_engine:OTHER_SERVER``), first in the table."""
    from ingestd.store.vectors.engines import ENGINES as TABLE

    saved = dict(TABLE)
    TABLE.clear()
    TABLE.update({"other-server": "tests.fake_engine:OTHER_SERVER", **saved})
    try:
        yield "other-server"
    finally:
        TABLE.clear()
        TABLE.update(saved)


def test_a_second_server_engine_is_shown_by_its_own_name(
    tmp_path: Path, other_server: str, qdrant_stub: QdrantVersionStub
) -> None:
    """The server's name was written in its spec and again in the qdrant-client store,
    whose ``engine`` said ``server`` for any server: now the spec that connects the
    store names it, and the store, its collections' layout and the sync resources show
    the second server's own name."""
    from ingestd.daemon.sync.state.resources import Resources
    from ingestd.store.vectors.base import Layout
    from ingestd.store.vectors.engines import open_store, placed_engine

    cfg = load_config(None, overrides={"qdrant": {"url": f"{qdrant_stub.url}/other"}})
    assert placed_engine(cfg.qdrant, {}) == (other_server, None)
    res = Resources(cfg, tmp_path / "state", now=lambda: 0.0)
    try:
        assert res.engine() == (other_server, None) and res.durable_updates()
        before = qdrant_stub.answered
        store = res.store
        qdrant_stub.wait_checked(before)
        assert store.engine == other_server
        layout = Layout("docs", "docs__v1", aliased=True, sparse=True, dim=384, engine=store.engine)
        assert layout.engine == other_server
    finally:
        res.store.close()
        res.manifest.close()
    plain = load_config(None, overrides={"qdrant": {"url": qdrant_stub.url}}).qdrant
    before = qdrant_stub.answered
    with contextlib.closing(open_store(plain, {})) as server:
        qdrant_stub.wait_checked(before)
        assert placed_engine(plain, {}) == ("server", None) and server.engine == "server"
