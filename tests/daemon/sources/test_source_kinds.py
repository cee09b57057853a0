"""A new kind of source is one module plus one entry of the source table.

A test-only kind, ``memory`` (documents held in a dict, changes polled), is registered
through :data:`~ingestd.daemon.sources.kinds.SOURCE_KINDS` alone, and the sync engine
indexes it, follows its edits, moves and deletions, and ends equal to a from-scratch
ingest, with ``verify`` clean: the planner, the preparer, ``verify`` and ``read``
speak only to the :class:`~ingestd.daemon.sources.base.Source` interface.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ingestd.daemon.config import ConfigError, SourceConfig, load_config
from ingestd.daemon.engine import Engine
from ingestd.daemon.sources import kinds
from ingestd.daemon.sources.base import (
    ChangeMode,
    FileStat,
    Scan,
    Versioned,
    is_watched,
    open_source,
    reader_class,
)
from ingestd.daemon.sources.local import LocalFolder, LocalSourceConfig
from ingestd.daemon.sources.shown import FolderStatus, When
from tests.helpers import MD_DOCS, SMALL_MD, fake_vectors, store_snapshot, without_provenance

#: The documents of each ``memory`` source, by its ``root``: path -> bytes.
TREES: dict[str, dict[str, bytes]] = {}


class MemorySourceConfig(SourceConfig):
    """A ``kind: memory`` source: its ``root`` names a tree of :data:`TREES`.

    Attributes:
        suffix: the documents' file name ending (a key of this kind alone).
    """

    kind: str = "memory"
    suffix: str = ".md"


class MemoryStatus(FolderStatus):
    """What ``status`` and ``sources`` show of a ``memory`` source: its tree's size."""

    def recorded(self, root: Path) -> dict[str, Any] | None:
        tree = TREES.get(str(root))
        return None if tree is None else {"in_memory": len(tree)}

    def shows(self, s: Mapping[str, Any]) -> bool:
        return "in_memory" in s

    def where_lines(self, s: Mapping[str, Any]) -> Iterator[str]:
        yield f"  tree in memory: {s['root']}"

    def lines(self, s: Mapping[str, Any], when: When) -> Iterator[str]:
        yield f"  {s['in_memory']} file(s) in memory"

    def where(self, row: Mapping[str, Any]) -> str:
        return f"memory:{row['root']}"

    def sources_lines(self, row: Mapping[str, Any], when: When) -> Iterator[str]:
        yield f"{row['source']}\t{row['in_memory']} file(s) in memory"


MEMORY_STATUS = MemoryStatus()


class MemorySource:
    """Documents held in :data:`TREES` (a test double of a source that is not a folder)."""

    kind: ClassVar[str] = "memory"
    changes: ChangeMode = "polled"
    poll_s = 60.0

    def __init__(self, config: MemorySourceConfig, state_dir: Path | None = None) -> None:
        self.name = config.name
        self.config = config
        self.root = Path(config.root)

    @property
    def docs(self) -> dict[str, bytes]:
        return TREES.setdefault(str(self.root), {})

    def missing(self) -> str | None:
        return None if str(self.root) in TREES else f"tree {self.root} is gone"

    def _stat(self, rel: str) -> FileStat:
        data = self.docs[rel]
        digest = int.from_bytes(hashlib.sha256(data).digest()[:6], "little")
        ident = int.from_bytes(hashlib.sha256(rel.encode()).digest()[:6], "little")
        return FileStat(len(data), digest, digest, ident)

    def scan(self, under: str = "") -> Scan:
        out = Scan()
        for rel in self.docs:
            if not under or rel.startswith(under.rstrip("/") + "/"):
                out[rel] = self._stat(rel)
        return out

    def is_folder(self, rel: str) -> bool:
        return any(p.startswith(rel.rstrip("/") + "/") for p in self.docs)

    def stat(self, rel: str) -> FileStat | None:
        return self._stat(rel) if rel in self.docs else None

    def accepts(self, rel: str) -> bool:
        return rel.endswith(self.config.suffix)

    def ignores_folder(self, rel: str) -> bool:
        return False

    def read(self, rel: str) -> bytes:
        try:
            return self.docs[rel]
        except KeyError:
            raise FileNotFoundError(rel) from None

    def revision(self) -> str | None:
        return None


@pytest.fixture
def memory_kind(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, bytes]]:
    """The ``memory`` kind registered through the table (one entry), and its trees."""
    monkeypatch.setitem(
        kinds.SOURCE_KINDS,
        "memory",
        kinds.SourceKind(
            reader=f"{__name__}:MemorySource",
            config=f"{__name__}:MemorySourceConfig",
            shown=f"{__name__}:MEMORY_STATUS",
        ),
    )
    TREES.clear()
    yield TREES
    TREES.clear()


def _config(state: Path, root: str = "/mem/docs") -> Any:
    return load_config(
        None,
        overrides={
            "state_dir": str(state),
            "sources": [{"kind": "memory", "name": "mem", "root": root}],
        },
    )


def _scratch(tmp: Path, docs: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    """Points of a from-scratch ingest of ``docs`` (a ``memory`` source of its own)."""
    TREES["/mem/scratch"] = dict(docs)
    state = tmp / f"scratch-{len(list(tmp.iterdir()))}"
    cfg = load_config(
        None,
        overrides={
            "state_dir": str(state),
            "sources": [{"kind": "memory", "name": "mem", "root": "/mem/scratch"}],
        },
    )
    eng = Engine(cfg, state, embed_model=fake_vectors)
    try:
        eng.sync("mem")
    finally:
        eng.close()
    return without_provenance(store_snapshot(state))


def test_an_unknown_kind_is_a_config_error_that_lists_the_kinds(tmp_path: Path) -> None:
    assert {"git", "local", "sitemap"} <= set(kinds.SOURCE_KINDS)
    listed = ", ".join(sorted(kinds.SOURCE_KINDS))
    with pytest.raises(ConfigError, match=rf"sources\[0\]\.kind.*expected one of: {listed}"):
        load_config(None, overrides={"sources": [{"kind": "ftp", "root": str(tmp_path)}]})


def test_the_local_folder_is_the_default_kind_and_is_watched(tmp_path: Path) -> None:
    source = open_source(LocalSourceConfig(name="docs", root=tmp_path))
    assert isinstance(source, LocalFolder) and is_watched(source)
    assert source.missing() is None
    assert open_source(LocalSourceConfig(name="x", root=tmp_path / "gone")).missing() == (
        f"ROOT MISSING: {tmp_path / 'gone'} is not a folder (unmounted, moved or deleted?)"
    )


def _sync(state: Path, paths: list[str] | None = None) -> Any:
    """One sync of the ``mem`` source in a fresh engine, closed after (the store is free)."""
    eng = Engine(_config(state), state, embed_model=fake_vectors)
    try:
        source = eng.context.source("mem")
        assert isinstance(source, MemorySource) and not is_watched(source)
        res = eng.sync("mem", paths)
        assert eng.verify("mem").clean
        return res
    finally:
        eng.close()


def test_a_kind_registered_through_the_table_syncs_to_the_from_scratch_store(
    memory_kind: dict[str, dict[str, bytes]], tmp_path: Path
) -> None:
    docs = {rel: (MD_DOCS / rel).read_bytes() for rel in SMALL_MD[:4]}
    memory_kind["/mem/docs"] = docs
    state = tmp_path / "state"
    assert _sync(state).indexed == 4
    first = without_provenance(store_snapshot(state))
    assert first and first == _scratch(tmp_path, docs)
    # an edit, a move and a deletion, each planned from the interface alone
    moved = SMALL_MD[1].replace(".md", "-moved.md")
    docs[SMALL_MD[0]] = docs[SMALL_MD[0]] + b"\n\nA paragraph added at the end.\n"
    docs[moved] = docs.pop(SMALL_MD[1])
    del docs[SMALL_MD[2]]
    res = _sync(state)
    # the move is a write of the new path and a deletion of the old, its vectors reused
    assert (res.indexed, res.deleted, res.embedded) == (2, 2, 1)
    assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, docs)
    # a change set naming paths (as `ingestd sync PATH` gives them)
    docs["new/page.md"] = b"# A new page\n\nWritten in memory.\n"
    assert _sync(state, ["new"]).indexed == 1
    assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, docs)
    # a source that cannot be listed is not a deletion of its documents
    del memory_kind["/mem/docs"]
    eng = Engine(_config(state), state, embed_model=fake_vectors)
    try:
        assert eng.plan("mem").root_missing
        assert eng.verify("mem").root_missing
    finally:
        eng.close()
    memory_kind["/mem/docs"] = docs
    assert without_provenance(store_snapshot(state)) == _scratch(tmp_path, docs)


def test_the_daemon_polls_a_polled_source_at_its_interval(
    memory_kind: dict[str, dict[str, bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.daemon.harness import Harness
    from tests.helpers import CountingEmbedder, wait_for

    monkeypatch.setattr(MemorySource, "poll_s", 0.3)
    docs = {SMALL_MD[0]: (MD_DOCS / SMALL_MD[0]).read_bytes()}
    memory_kind["/mem/docs"] = docs
    config = tmp_path / "ingestd.yaml"
    config.write_text("sources:\n  - {kind: memory, name: mem, root: /mem/docs}\n")
    embed = CountingEmbedder(fake_vectors)
    with Harness(tmp_path, tmp_path / "state", embed, config_path=config) as h:
        assert {p["path"] for p in h.points().values()} == {SMALL_MD[0]}
        docs["later.md"] = b"# Written later\n\nNo event announces it: a poll finds it.\n"
        wait_for(
            lambda: "later.md" in {p["path"] for p in h.points().values()},
            30,
            "the polled change to be indexed",
        )
        assert h.settle().clean


def test_a_kind_is_configured_by_its_own_model_and_a_key_of_another_kind_is_named(
    memory_kind: dict[str, dict[str, bytes]], tmp_path: Path
) -> None:
    def load(source: dict[str, Any]) -> Any:
        return load_config(None, overrides={"state_dir": str(tmp_path), "sources": [source]})

    cfg = load({"kind": "memory", "name": "mem", "root": "/mem/docs", "suffix": ".txt"})
    (src,) = cfg.sources
    assert isinstance(src, MemorySourceConfig) and src.suffix == ".txt"
    memory = open_source(src)
    assert memory.accepts("a.txt") and not memory.accepts("b.md")
    (local,) = load({"root": str(tmp_path)}).sources
    assert isinstance(local, LocalSourceConfig) and local.kind == "local"
    foreign = (
        r"sources\[0\]\.{key}: {key} is a key of kind: {of} sources \(this source is kind: {kind}\)"
    )
    with pytest.raises(ConfigError, match=foreign.format(key="refs", of="git", kind="local")):
        load({"root": str(tmp_path), "refs": ["main"]})  # a git key on a folder
    with pytest.raises(ConfigError, match=foreign.format(key="suffix", of="memory", kind="local")):
        load({"root": str(tmp_path), "suffix": ".txt"})  # the memory kind's key
    with pytest.raises(ConfigError, match=foreign.format(key="git", of="local", kind="git")):
        load(
            {
                "kind": "git",
                "name": "b",
                "url": "https://git.example.com/b.git",
                "refs": ["main"],
                "git": True,
            }
        )  # a folder's key on a repository
    with pytest.raises(ConfigError, match=r"sources\[0\]\.suffix: Input should be a valid"):
        load({"kind": "memory", "name": "mem", "root": "/mem/docs", "suffix": ["x"]})
    # a key of the model every kind shares that a kind does not read: refused by name
    with pytest.raises(
        ConfigError, match=foreign.format(key="root", of="local or kind: memory", kind="git")
    ):
        load({"kind": "git", "name": "b", "url": "/b.git", "refs": ["main"], "root": "/x"})
    with pytest.raises(ConfigError, match=r"sources\[0\]\.inclde: unknown key; check its spelling"):
        load({"kind": "memory", "name": "mem", "root": "/mem/docs", "inclde": ["*"]})
    for kind in kinds.SOURCE_KINDS:  # every kind takes its own keys and refuses the others'
        model = kinds.config_model(kind)
        others = (
            set().union(*(kinds.config_model(k).keys() for k in kinds.SOURCE_KINDS)) - model.keys()
        )
        assert others, kind
        for key in others:
            with pytest.raises(ConfigError, match=rf"sources\[0\]\.{key}: {key} is a key of kind"):
                load({"kind": kind, "name": "n", "root": "/mem/docs", "url": "/b.git",
                      "refs": ["main"], key: None})  # fmt: skip


def test_status_and_sources_ask_the_kind_for_its_lines(
    memory_kind: dict[str, dict[str, bytes]], tmp_path: Path
) -> None:
    import time

    from click.testing import CliRunner

    from ingestd.daemon.cli.index import sources
    from ingestd.daemon.cli.shared.state import manifest_reader
    from ingestd.daemon.commands.status import local_status
    from ingestd.daemon.commands.status_text import status_lines

    memory_kind["/mem/docs"] = {SMALL_MD[0]: (MD_DOCS / SMALL_MD[0]).read_bytes()}
    state = tmp_path / "state"
    assert _sync(state).indexed == 1
    with manifest_reader(None, state) as m:
        st = local_status(m, state)
    (entry,) = st["sources"]
    assert entry["in_memory"] == 1 and entry["documents"] == 1
    text = "\n".join(status_lines(st, time.time()))
    assert "mem -> collection ingestd\n  tree in memory: /mem/docs\n" in text
    assert "\n  1 file(s) in memory\n  last sync: " in text
    out = CliRunner().invoke(sources, ["--state-dir", str(state)])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == [
        "mem\tmemory:/mem/docs\tingestd\t1 documents",
        "mem\t1 file(s) in memory",
    ]


class VersionedMemory(MemorySource, Versioned):
    """A ``memory`` source whose documents are ``<version>:<path>`` (a version per prefix)."""

    def versions(self) -> dict[str, str]:
        return {
            rel.partition(":")[0]: self.commit_of(rel.partition(":")[0]) or "" for rel in self.docs
        }

    def commit_of(self, version: str) -> str | None:
        texts = sorted((r, d) for r, d in self.docs.items() if r.startswith(version + ":"))
        return hashlib.sha1(repr(texts).encode()).hexdigest() if texts else None

    def commits_off(self, version: str, commits: Iterable[str]) -> set[str]:
        return set(commits) - {self.commit_of(version)}


def test_a_versioned_kind_declares_its_power_and_shares_a_point_between_versions(
    memory_kind: dict[str, dict[str, bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        kinds.SOURCE_KINDS,
        "memory",
        kinds.SourceKind(
            reader=f"{__name__}:VersionedMemory",
            config=f"{__name__}:MemorySourceConfig",
            shown=f"{__name__}:MEMORY_STATUS",
        ),
    )
    page = (MD_DOCS / SMALL_MD[0]).read_bytes()
    memory_kind["/mem/docs"] = {
        f"v1:{SMALL_MD[0]}": page,
        f"v2:{SMALL_MD[0]}": page,
        "v2:new.md": b"# Only in v2\n\nA page the second version adds.\n",
    }
    state = tmp_path / "state"
    assert _sync(state).indexed == 3
    points = store_snapshot(state).values()
    by_path: dict[str, list[Any]] = {}
    for p in points:
        by_path.setdefault(p["path"], []).append(p["version"])
    # the page both versions hold is one set of points, each naming both versions
    assert {tuple(v) for v in by_path[SMALL_MD[0]]} == {("v1", "v2")}
    assert {tuple(v) for v in by_path["new.md"]} == {("v2",)}
    assert all(p["git_commit"] for p in points)


def test_a_power_had_but_not_declared_is_refused_when_the_kind_loads(
    memory_kind: dict[str, dict[str, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Undeclared(MemorySource):
        versions = VersionedMemory.versions
        commit_of = VersionedMemory.commit_of
        commits_off = VersionedMemory.commits_off

    class Lacking(MemorySource, Versioned):
        def versions(self) -> dict[str, str]:
            return {}

    for cls, why in ((Undeclared, "declare it among its bases"), (Lacking, "lacks commit_of")):
        monkeypatch.setattr(sys.modules[__name__], cls.__name__, cls, raising=False)
        monkeypatch.setitem(
            kinds.SOURCE_KINDS,
            "memory",
            kinds.SourceKind(
                reader=f"{__name__}:{cls.__name__}",
                config=f"{__name__}:MemorySourceConfig",
                shown=f"{__name__}:MEMORY_STATUS",
            ),
        )
        with pytest.raises(TypeError, match=why):
            reader_class("memory")
