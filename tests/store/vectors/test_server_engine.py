"""The Qdrant server is an entry of the engines' table like the embedded engines.

The settings select it outright (``qdrant.url``); it is no embedded engine: the state
dir keeps nothing of it, it is not an answer to ``qdrant.engine``, and every daemon
decision about it (owner, damage, clean-close proof, counting by source) is read from
its spec through :mod:`ingestd.store.vectors.engines`. No Qdrant server runs here:
the store is opened against a loopback stub that answers qdrant-client's version check
(its only request when a client is made) and is never called
(:class:`tests.helpers.QdrantVersionStub`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.daemon.config import ConfigError, load_config
from ingestd.daemon.sync.state.resources import Resources
from ingestd.store.vectors.client.qdrant import QdrantStore
from ingestd.store.vectors.engines import (
    ENGINES,
    embedded,
    engine_names,
    engine_spec,
    open_store,
    placed_engine,
)
from tests.helpers import QdrantVersionStub

pytestmark = pytest.mark.engine("edge")  # the table itself: once

SERVER = "server"


def test_the_server_is_a_table_entry_and_no_embedded_engine() -> None:
    assert SERVER in ENGINES
    spec = engine_spec(SERVER)
    assert spec.name == SERVER and not spec.embedded and spec.durable_updates
    assert SERVER not in engine_names()
    with pytest.raises(ConfigError, match="Input should be 'edge' or 'local'"):
        load_config(None, overrides={"qdrant": {"engine": SERVER}})


def test_a_url_selects_the_server_and_the_state_dir_keeps_nothing(
    tmp_path: Path, qdrant_stub: QdrantVersionStub
) -> None:
    url = qdrant_stub.url
    folders = {"edge": tmp_path / "edge", "qdrant": tmp_path / "qdrant"}
    server = load_config(None, overrides={"qdrant": {"url": url}}).qdrant
    assert not embedded(server)
    assert placed_engine(server, folders) == (SERVER, None)
    before = qdrant_stub.answered
    store = open_store(server, folders, read_only=True)
    qdrant_stub.wait_checked(before)
    try:
        assert isinstance(store, QdrantStore) and store.engine == SERVER
    finally:
        store.close()
    assert list(tmp_path.iterdir()) == []
    local = load_config(None, overrides={"qdrant": {"engine": "local"}}).qdrant
    assert embedded(local) and placed_engine(local, folders) == ("local", None)


def test_the_sync_resources_treat_a_server_as_durable_and_unsealed(
    tmp_path: Path, qdrant_stub: QdrantVersionStub
) -> None:
    url = qdrant_stub.url
    cfg = load_config(None, overrides={"qdrant": {"url": url}})
    res = Resources(cfg, tmp_path / "state", now=lambda: 0.0)
    try:
        assert res.engine() == (SERVER, None)
        assert res.durable_updates() and res.proven("docs")
        assert res.held_points("docs") is None and res.physical_of("docs") is None
        before = qdrant_stub.answered
        assert isinstance(res.store, QdrantStore)
        qdrant_stub.wait_checked(before)
        assert not (tmp_path / "state" / "edge").exists()
    finally:
        res.store.close()
        res.manifest.close()


def test_takeover_refuses_a_server(tmp_path: Path, qdrant_stub: QdrantVersionStub) -> None:
    url = qdrant_stub.url
    config = tmp_path / "config.yaml"
    config.write_text(f"qdrant:\n  url: {url}\nsources: []\n")
    out = CliRunner().invoke(
        cli, ["takeover", "--config", str(config), "--state-dir", str(tmp_path / "s"), "--yes"]
    )
    assert out.exit_code == 2, out.output
    assert "a Qdrant server (qdrant.url) belongs to no state dir" in out.output
