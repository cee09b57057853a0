"""One store never serves two state dirs, one after the other included.

Before: two state dirs whose configs named the same ``qdrant.edge_path``, run one after
the other, each adopted the other's source (a phantom source "ROOT MISSING"), search in
one returned the other's documents, and ``forget`` in the second deleted the first's
points while the first's ``status`` said all was well. Now the store records the state
dir it belongs to, and every other state dir is refused in one line naming both.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.sync.state.ownership import OWNER_FILE, StoreOwnedError
from tests.helpers import copy_tree, fake_vectors, make_engine, run_cli, store_folder

ENGINE_KEY = {"edge": "edge_path", "local": "path"}


def _config(tmp: Path, name: str, root: Path, store: Path, engine: str) -> Path:
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(
        f"state_dir: {tmp / name}\n"
        f"sources:\n  - {{name: {name}, root: {root}}}\n"
        f"qdrant:\n  {ENGINE_KEY[engine]}: {store}\n"
    )
    return cfg


def _engine(cfg: Any, state: Path) -> contextlib.closing[Any]:
    """An engine on ``state`` with :func:`fake_vectors`, closed when the block ends."""
    from ingestd.daemon.engine import Engine

    return contextlib.closing(Engine(cfg, state, embed_model=fake_vectors))


def test_a_second_state_dir_is_refused_the_first_ones_store(
    tmp_path: Path, qdrant_engine: str
) -> None:
    from ingestd.daemon.config import load_config

    store = tmp_path / "shared-store"
    one, two = (
        copy_tree(tmp_path / "one"),
        copy_tree(tmp_path / "two", ("docs/concepts/glossary.md",)),
    )
    cfg_one = load_config(_config(tmp_path, "a", one, store, qdrant_engine))
    with _engine(cfg_one, tmp_path / "a") as eng:
        eng.sync("a")
    assert (store / OWNER_FILE).is_file()
    cfg_two = load_config(_config(tmp_path, "b", two, store, qdrant_engine))
    with _engine(cfg_two, tmp_path / "b") as eng:
        with pytest.raises(StoreOwnedError) as err:
            eng.sync("b")
        assert str(tmp_path / "a") in str(err.value) and str(tmp_path / "b") in str(err.value)
    # the command line: one line, exit 1, for status, search, resync and forget
    cfg = str(tmp_path / "b.yaml")
    for args in (
        ("status",),
        ("search", "--mode", "sparse", "span"),
        ("resync",),
        ("forget", "a"),
    ):
        res = run_cli(*args, "--config", cfg)
        assert res.returncode in (1, 2), (args, res.stderr)
        assert "belongs to state dir" in res.stderr or "unknown source" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr
    # the first state dir is whole
    with _engine(cfg_one, tmp_path / "a") as eng:
        assert eng.verify("a").clean
        assert {p["source"] for _, p in eng.resources.store.scroll("ingestd")} == {"a"}


def test_a_state_dir_moved_with_its_store_inside_keeps_it(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "docs")
    with contextlib.closing(make_engine(root, tmp_path / "state", fake_vectors)) as eng:
        eng.sync(next(iter(eng.context.sources)))
    shutil.copytree(tmp_path / "state", tmp_path / "copy")
    with contextlib.closing(make_engine(root, tmp_path / "copy", fake_vectors)) as eng:
        assert eng.verify(next(iter(eng.context.sources))).clean
    owner = (store_folder(tmp_path / "copy") / OWNER_FILE).read_text()
    assert str(tmp_path / "copy") in owner


def _points_of(store: Path, engine: str, source: str) -> int:
    from tests.helpers import open_store

    handle = open_store(store, engine)
    try:
        return sum(1 for _, p in handle.scroll("ingestd") if p["source"] == source)
    finally:
        handle.close()


def test_a_store_whose_owner_is_away_is_refused_until_taken_over(
    tmp_path: Path, qdrant_engine: str
) -> None:
    """The owner renamed or unmounted: another state dir is still refused, in one line,
    until it takes the store over with the explicit command; the owner, moved, keeps it."""
    from click.testing import CliRunner

    from ingestd.daemon.cli.main import cli
    from ingestd.daemon.config import load_config

    store = tmp_path / "shared-store"
    one, two = (
        copy_tree(tmp_path / "one"),
        copy_tree(tmp_path / "two", ("docs/concepts/glossary.md",)),
    )
    cfg_one = load_config(_config(tmp_path, "a", one, store, qdrant_engine))
    with _engine(cfg_one, tmp_path / "a") as eng:
        eng.sync("a")
    held = _points_of(store, qdrant_engine, "a")
    (tmp_path / "a").rename(tmp_path / "a-away")  # renamed, or its disk unmounted
    cfg_two = load_config(_config(tmp_path, "b", two, store, qdrant_engine))
    with _engine(cfg_two, tmp_path / "b") as eng:
        with pytest.raises(StoreOwnedError, match="not there now"):
            eng.sync("b")
    cfg = str(tmp_path / "b.yaml")
    for args in (("status",), ("search", "--mode", "sparse", "span"), ("resync",), ("forget", "a")):
        res = run_cli(*args, "--config", cfg)
        assert res.returncode in (1, 2), (args, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1, res.stderr
        if args[0] != "forget":  # forget: a is no source of b's ("unknown source", exit 2)
            assert "belongs to state dir" in lines[0] and "ingestd takeover" in lines[0]
    assert _points_of(store, qdrant_engine, "a") == held, "nothing of the owner's was touched"
    # the owner under its new name keeps its store (its id moved with it)
    with _engine(cfg_one, tmp_path / "a-away") as eng:
        assert eng.verify("a").clean
    # the explicit takeover: says what it will do, asks, and does nothing when refused
    asked = CliRunner().invoke(cli, ["takeover", "--config", cfg], input="n\n")
    assert asked.exit_code == 1 and "Take it over?" in asked.output, asked.output
    assert "refused from then on" in asked.output and str(store) in asked.output
    with pytest.raises(StoreOwnedError):
        with _engine(cfg_two, tmp_path / "b") as eng:
            eng.sync("b")
    done = CliRunner().invoke(cli, ["takeover", "--yes", "--config", cfg])
    assert done.exit_code == 0, done.output
    assert f"is now state dir {tmp_path / 'b'}'s" in done.output
    with _engine(cfg_two, tmp_path / "b") as eng:
        eng.sync("b")
        assert {p["source"] for _, p in eng.resources.store.scroll("ingestd")} == {"a", "b"}
    # the first owner is refused now, wherever it is
    (tmp_path / "a-away").rename(tmp_path / "a")
    res = run_cli("status", "--config", str(tmp_path / "a.yaml"))
    assert res.returncode == 1 and "belongs to state dir" in res.stderr, res.stderr


def test_a_copied_state_dir_is_refused_the_originals_store_until_taken_over(
    tmp_path: Path, qdrant_engine: str
) -> None:
    """A copy holds the original's id: started against the original's store (outside
    both), it was taken for the owner and the two manifests wrote one store in turn."""
    from click.testing import CliRunner

    from ingestd.daemon.cli.main import cli
    from ingestd.daemon.config import load_config
    from ingestd.daemon.sync.state.ownership import state_id

    store = tmp_path / "shared-store"
    root = copy_tree(tmp_path / "one")
    cfg_one = load_config(_config(tmp_path, "a", root, store, qdrant_engine))
    with _engine(cfg_one, tmp_path / "a") as eng:
        eng.sync("a")
    held = _points_of(store, qdrant_engine, "a")
    shutil.copytree(tmp_path / "a", tmp_path / "a-copy")  # a backup, started elsewhere
    assert state_id(tmp_path / "a-copy") == state_id(tmp_path / "a")
    with _engine(cfg_one, tmp_path / "a-copy") as eng:
        with pytest.raises(StoreOwnedError, match="a copy of that state dir"):
            eng.sync("a")
    assert _points_of(store, qdrant_engine, "a") == held
    with _engine(cfg_one, tmp_path / "a") as eng:  # the original keeps it
        assert eng.verify("a").clean
    copy_cfg = tmp_path / "a-copy.yaml"
    copy_cfg.write_text(
        (tmp_path / "a.yaml").read_text().replace(str(tmp_path / "a"), str(tmp_path / "a-copy"))
    )
    done = CliRunner().invoke(cli, ["takeover", "--yes", "--config", str(copy_cfg)])
    assert done.exit_code == 0, done.output
    assert state_id(tmp_path / "a-copy") != state_id(tmp_path / "a")  # an id of its own
    with _engine(cfg_one, tmp_path / "a-copy") as eng:
        assert eng.verify("a").clean
    res = run_cli("status", "--config", str(tmp_path / "a.yaml"))
    assert res.returncode == 1 and "belongs to state dir" in res.stderr, res.stderr
