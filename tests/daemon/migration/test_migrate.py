"""Changing the embedding model without downtime: migrations end to end.

Two real models whose vectors differ: the bundled all-MiniLM-L6-v2 (mean pooling) and
a copy of it configured with CLS pooling (its weights linked, its pooling config
changed: another fingerprint, other vectors, the same tokenizer). The migration runs
inside a sync, as in the daemon; the test hook (``engine.context.hook``) stands at
its checkpoints and at the switch, where the daemon serves searches and changes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.daemon.commands.index.migrate import migrate as migrate_cmd
from ingestd.daemon.commands.query.search import search as search_cmd
from ingestd.daemon.commands.status import status_of
from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from ingestd.daemon.migration import version_writer
from ingestd.store.embedding.embedder import BUNDLED_MODEL, model_info
from ingestd.store.manifest.builds import BuildDocuments
from tests.helpers import (
    copy_tree,
    fake_vectors,
    open_state_store,
    state_dense_vectors,
    store_snapshot,
    without_provenance,
)

pytestmark = pytest.mark.slow

#: Four small real pages (about 2.5 KB each): a few chunks each.
FILES = (
    "docs/concepts/resources/index.md",
    "docs/concepts/instrumentation-scope/index.md",
    "docs/collector/install/docker.md",
    "docs/languages/go/resources.md",
)
QUERY = "how do I run the collector in docker"


class Crash(BaseException):
    """Stands for the process dying: nothing in ingestd catches it."""


@pytest.fixture(scope="session")
def cls_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled model's files, linked, with CLS pooling instead of mean pooling."""
    base = model_info(BUNDLED_MODEL).path
    dest = tmp_path_factory.mktemp("models") / "minilm-cls"
    for f in base.rglob("*"):
        if not f.is_file():
            continue
        rel = f.relative_to(base)
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        if rel.as_posix() == "1_Pooling/config.json":
            pooling = json.loads(f.read_text())
            pooling.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
            (dest / rel).write_text(json.dumps(pooling))
        else:
            os.symlink(f, dest / rel)
    return dest


def new_version(model: Path) -> str:
    """The physical name of the version a migration to ``model`` builds (the second)."""
    return f"ingestd__v2-{model_info(str(model)).fingerprint[:12]}"


@pytest.fixture(scope="session")
def models(real_model: Any) -> Callable[[Any], Any]:
    """Makes the embedding callable of a model; each model is loaded once per session."""
    from ingestd.store.embedding.embedder import SentenceTransformerEmbedder

    loaded: dict[Path, Any] = {real_model.info.path: real_model}

    def factory(info: Any) -> Any:
        if info.path not in loaded:
            loaded[info.path] = SentenceTransformerEmbedder(info, batch_size=16)
        return loaded[info.path]

    return factory


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return copy_tree(tmp_path / "docs", FILES)


@pytest.fixture
def one_document_per_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Write the new version one document per slice, so that a checkpoint falls midway."""
    monkeypatch.setattr(version_writer, "GROUP_DOCS", 1)


def engine(root: Path, state: Path, model: str, factory: Any) -> Engine:
    cfg = load_config(None, roots=[root], overrides={"embedding": {"model": model}})
    return Engine(cfg, state, model_factory=factory)


def ingest(root: Path, state: Path, model: str, factory: Any) -> None:
    e = engine(root, state, model, factory)
    try:
        res = e.sync(next(iter(e.context.sources)))
        assert not res.interrupted
    finally:
        e.close()


def dense_vectors(state: Path, collection: str = "ingestd") -> dict[str, np.ndarray]:
    """Every point's dense vector (the alias, or a physical version), read directly."""
    return state_dense_vectors(state, collection)


def physical_collections(state: Path) -> set[str]:
    store = open_state_store(state)
    try:
        return set(store.collections())
    finally:
        store.close()


def assert_same_vectors(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    low = [pid for pid in want if float(np.dot(got[pid], want[pid])) < 0.999]
    assert not low, f"{len(low)} vectors differ from the expected model's, e.g. {low[:3]}"


def assert_from_scratch(root: Path, state: Path, tmp: Path, model: str, factory: Any) -> None:
    """The store equals a from-scratch ingest with ``model``: ids, payload, vectors."""
    scratch_state = tmp / f"from-scratch-{len(list(tmp.iterdir()))}"
    ingest(root, scratch_state, model, factory)
    got, want = store_snapshot(state), store_snapshot(scratch_state)
    assert without_provenance(got) == without_provenance(want)
    assert_same_vectors(dense_vectors(state), dense_vectors(scratch_state))


def check_search(e: Engine, factory: Any, model: str) -> str:
    """Search now: there are hits, each scored against the version the alias points at
    with ``model``'s query vector (a hit of another version, or a query vector by another
    model, would score differently: the two models' vectors differ).

    Returns:
        The physical version the alias points at.
    """
    hits = search_cmd(e, QUERY, k=5, mode="dense")
    assert hits, "no hit"
    physical = e.resources.store.layout("ingestd").physical
    q = np.asarray(factory(model_info(model))([QUERY])[0], dtype=np.float32)
    ids = [h["id"] for h in hits]
    stored = {
        pid: vec for pid, _p, vec in e.resources.store.retrieve(physical, ids, with_vectors=True)
    }
    assert set(stored) == set(ids)
    for h in hits:
        want = float(np.dot(q, np.asarray(stored[h["id"]], dtype=np.float32)))
        assert abs(h["score"] - want) < 1e-3, f"a hit not scored by {model} against {physical}"
    return str(physical)


@pytest.fixture
def migration_state(tree: Path, scratch: Path, models: Any) -> Iterator[tuple[Path, Path]]:
    """A tree ingested with the bundled model: ``(root, state)``."""
    ingest(tree, scratch, BUNDLED_MODEL, models)
    yield tree, scratch


def test_migration_serves_one_version_at_a_time_follows_changes_and_ends_as_from_scratch(
    migration_state: tuple[Path, Path],
    cls_model: Path,
    models: Any,
    tmp_path: Path,
    one_document_per_slice: None,
) -> None:
    root, state = migration_state
    e = engine(root, state, str(cls_model), models)
    source = next(iter(e.context.sources))
    steps: list[tuple[str, str]] = []
    changed = root / FILES[0]
    pending: list[list[str]] = []
    midway: dict[str, Any] = {}

    def serve(serve_changes: bool) -> None:  # what the daemon does at a checkpoint
        if serve_changes and pending:
            res = e.sync(source, pending.pop())
            assert not res.interrupted and not res.deferred

    def hook(collection: str, step: str) -> None:
        model = str(cls_model) if step == "switched" else BUNDLED_MODEL
        steps.append((step, check_search(e, models, model)))
        checkpoints = [s for s, _ in steps if s == "checkpoint"]
        if len(checkpoints) == 2:  # the first document is in the new version
            midway.update(status_of(e.resources.manifest, e, state)["migrations"][0])
            changed.write_text(changed.read_text() + "\n\n## Added meanwhile\n\nA new paragraph.\n")
            (root / "docs" / "new.md").write_text("# New page\n\nWritten during the migration.\n")
            (root / FILES[3]).unlink()
            pending.append([FILES[0], "docs/new.md", FILES[3]])
        if step == "built":  # the change landed in both versions
            ids = set(e.expected_points(source)[0])
            assert {p for p, _ in e.resources.store.scroll("ingestd")} == ids
            record = BuildDocuments(e.resources.manifest).point_ids("ingestd")
            assert set(record) == ids

    e.context.hook = hook
    e.checkpoints.on_checkpoint = serve
    try:
        res = e.sync(source)
        assert not res.interrupted
        assert e.verify(source).clean
    finally:
        e.close()
    assert midway["phase"] == "building" and 0 < midway["docs_done"] < midway["docs_total"]
    assert midway["to"].startswith(f"model {cls_model}")
    names = [s for s, _ in steps]
    assert names[0] == "begun" and names[-2:] == ["switching", "switched"]
    assert "checkpoint" in names and "built" in names
    assert {v for s, v in steps if s != "switched"} == {"ingestd__v1"}
    assert steps[-1][1] == new_version(cls_model)
    assert physical_collections(state) == {new_version(cls_model)}  # the old one is dropped
    assert_from_scratch(root, state, tmp_path, str(cls_model), models)


def test_migration_resumes_after_a_crash_and_a_sigterm_without_embedding_twice(
    migration_state: tuple[Path, Path],
    cls_model: Path,
    models: Any,
    tmp_path: Path,
    one_document_per_slice: None,
) -> None:
    root, state = migration_state
    embedded: list[str] = []

    def counting(info: Any) -> Any:
        model = models(info)
        if info.path != cls_model:
            return model
        return lambda texts: embedded.extend(texts) or model(texts)

    def run(stop_at: int | None, crash: bool) -> tuple[Any, list[str]]:
        e = engine(root, state, str(cls_model), counting)
        steps: list[str] = []

        def hook(collection: str, step: str) -> None:
            steps.append(step)
            if step == "checkpoint" and steps.count("checkpoint") == stop_at:
                if crash:
                    raise Crash
                e.checkpoints.stop.set()  # SIGTERM

        e.context.hook = hook
        try:
            return e.sync(next(iter(e.context.sources))), steps
        finally:
            e.close()

    with pytest.raises(Crash):
        run(stop_at=2, crash=True)  # the first document is recorded, the second written
    assert physical_collections(state) == {"ingestd__v1", new_version(cls_model)}
    res, steps = run(stop_at=1, crash=False)
    assert res.interrupted and "switched" not in steps
    res, steps = run(stop_at=None, crash=False)
    assert not res.interrupted and steps[-1] == "switched"
    # documents recorded before are not written again; none is embedded twice
    assert steps.count("checkpoint") < len(FILES)
    assert len(embedded) == len(set(embedded)) == len(store_snapshot(state))
    assert physical_collections(state) == {new_version(cls_model)}
    e = engine(root, state, str(cls_model), counting)
    try:
        assert e.verify(next(iter(e.context.sources))).clean
    finally:
        e.close()
    assert_from_scratch(root, state, tmp_path, str(cls_model), models)


def test_abort_drops_the_partial_version_and_leaves_the_current_one_untouched(
    migration_state: tuple[Path, Path],
    cls_model: Path,
    models: Any,
    one_document_per_slice: None,
) -> None:
    root, state = migration_state
    before, vectors = store_snapshot(state), dense_vectors(state)
    e = engine(root, state, str(cls_model), models)
    source = next(iter(e.context.sources))
    answers: list[dict[str, Any]] = []

    def hook(collection: str, step: str) -> None:
        if step == "checkpoint" and not answers:  # `ingestd migrate --abort`, served here
            answers.append(migrate_cmd(e, abort=True))

    e.context.hook = hook
    try:
        res = e.sync(source)
        assert not res.interrupted
        assert check_search(e, models, BUNDLED_MODEL) == "ingestd__v1"
        status = status_of(e.resources.manifest, e, state)["migrations"]
    finally:
        e.close()
    assert answers[0]["aborted"] == [
        {
            "collection": "ingestd",
            "aborted": True,
            "dropped": new_version(cls_model),
            "kept": "ingestd__v1",
        }
    ]
    assert [m["phase"] for m in status] == ["aborted"]
    assert physical_collections(state) == {"ingestd__v1"}
    assert store_snapshot(state) == before
    assert_same_vectors(dense_vectors(state), vectors)
    # the config still asks for the new model: the current version keeps its own
    e = engine(root, state, str(cls_model), models)
    try:
        e.sync(source)
        assert e.resources.manifest.collection_build("ingestd") is None
        assert check_search(e, models, BUNDLED_MODEL) == "ingestd__v1"
        assert e.verify(source).clean
    finally:
        e.close()
    assert store_snapshot(state) == before


class FakeModel:
    """Stands for a model in the command-line test: vectors of its fingerprint and the text."""

    loaded = True

    def __init__(self, info: Any, **_kw: Any) -> None:
        self.info = info

    def __call__(self, texts: Any) -> Any:
        return fake_vectors([self.info.fingerprint + t for t in texts], self.info.dim)


def test_the_cost_is_said_before_and_the_cli_aborts_restarts_and_reports(
    tree: Path, tmp_path: Path, cls_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ingestd.store.embedding.embedder

    monkeypatch.setattr(ingestd.store.embedding.embedder, "SentenceTransformerEmbedder", FakeModel)
    state = tmp_path / "state"

    def config(model: str, **embedding: Any) -> Path:
        path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.yaml"
        source = {"name": "docs", "root": str(tree)}
        path.write_text(
            json.dumps({"sources": [source], "embedding": {"model": model, **embedding}})
        )
        return path

    def cli_run(*args: str) -> Any:
        res = CliRunner().invoke(cli, [*args, "--state-dir", str(state)])
        assert res.exit_code in (0, 1), res.output
        return res

    def cost_of(cfg: Path) -> dict[str, Any]:
        res = cli_run("resync", "--dry-run", "--json", "-c", str(cfg))
        (out,) = json.loads(res.stdout)["migrations"]
        return dict(out)

    def crash(_collection: str, step: str) -> None:
        if step == "checkpoint":
            raise Crash

    old, new = config(BUNDLED_MODEL), config(str(cls_model))
    cli_run("resync", "-c", str(old))
    before = store_snapshot(state)
    # the cost, said before anything is done
    cost = cost_of(new)
    assert cost["documents"] == len(FILES) and cost["chunks"] == len(before)
    assert cost["to_embed"] == cost["texts"] > 0 and cost["cached"] == 0 and cost["exact"]
    assert cost["store_bytes"] > 0 and cost["memory_bytes"] > 80e6  # the second model's weights
    assert "in memory" in cost["summary"] and "to embed" in cost["summary"]
    assert cost["summary"] in cli_run("migrate", "--dry-run", "-c", str(new)).output
    assert store_snapshot(state) == before  # nothing written
    # a migration stopped midway (a crash), then aborted from the command line
    e = Engine(load_config(new), state)
    e.context.hook = crash
    with pytest.raises(Crash):
        e.sync("docs")
    e.close()
    assert "collection ingestd: migration building" in cli_run("status", "-c", str(new)).output
    res = cli_run("migrate", "--abort", "-c", str(new))
    dropped = new_version(cls_model)
    assert f"migration aborted, {dropped} dropped, ingestd__v1 untouched" in res.output
    assert store_snapshot(state) == before
    res = cli_run("status", "-c", str(new))
    assert "the migration to model" in res.output and "was aborted" in res.output
    # started again from the command line, it runs to the end here
    res = cli_run("migrate", "-c", str(new))
    assert "no migration: every collection is made by the configured model" in res.output
    after = store_snapshot(state)
    assert set(after) == set(before) and after != before  # the same chunks, the new model
    assert "migration" not in cli_run("status", "-c", str(new)).stdout
    # going back to the first model: its vectors are still cached
    back = cost_of(old)
    assert back["cached"] == back["texts"] and back["to_embed"] == 0
    # a fit_model change re-chunks: the counts are an estimate
    fit = cost_of(config(str(cls_model), fit_model=False))
    assert fit["changes"] == ["fit_model: True -> False"] and not fit["exact"]


def test_the_daemon_migrates_in_the_background_serving_searches_status_and_changes(
    tree: Path, cls_model: Path, tmp_path: Path, one_document_per_slice: None
) -> None:
    from ingestd.daemon.wire.protocol import request
    from tests.daemon.harness import Harness, fast_tmp
    from tests.helpers import CountingEmbedder, make_engine, wait_for

    embed = CountingEmbedder(fake_vectors)
    gates = {
        s: (threading.Event(), threading.Event()) for s in ("checkpoint", "switching", "switched")
    }

    def configure(e: Engine) -> None:
        seen: list[str] = []

        def hook(_collection: str, step: str) -> None:
            seen.append(step)
            if step not in gates or gates[step][0].is_set() or seen.count("checkpoint") < 2:
                return  # the pause midway: the first document is in the new version
            reached, release = gates[step]
            reached.set()
            deadline = time.monotonic() + 60
            while (
                not release.wait(0.01)
                and not e.checkpoints.stop.is_set()
                and time.monotonic() < deadline
            ):
                assert e.checkpoints.on_checkpoint is not None
                e.checkpoints.on_checkpoint(
                    step == "checkpoint"
                )  # the pause serves searches (and changes)

        e.context.hook = hook

    def search() -> list[dict[str, Any]]:
        hits = request(state, "search", {"query": QUERY, "mode": "dense"}, timeout=30)
        assert hits
        return list(hits)

    with fast_tmp() as state:
        e = make_engine(tree, state, embed)
        e.sync(next(iter(e.context.sources)))
        e.close()
        h = Harness(tree, state, embed, configure=configure, embedding={"model": str(cls_model)})
        with h.start(wait_idle=False):
            wait_for(gates["checkpoint"][0].is_set, 60, "the migration midway")
            search()
            (m,) = request(state, "status", {}, timeout=30)["migrations"]
            assert m["phase"] == "building" and 0 < m["docs_done"] < m["docs_total"]
            assert m["version"] == new_version(cls_model)
            assert m["current_version"] == "ingestd__v1"
            batches = h.service.batches_done
            (tree / FILES[0]).write_text("# Rewritten\n\nDuring the migration.\n")
            (tree / "docs" / "new.md").write_text("# New\n\nAlso during the migration.\n")
            wait_for(lambda: h.service.batches_done > batches, 30, "the change to be served")
            gates["checkpoint"][1].set()
            for step in ("switching", "switched"):
                wait_for(gates[step][0].is_set, 60, f"the migration at {step}")
                search()
                gates[step][1].set()
            h.settle(timeout=60)
            assert request(state, "status", {}, timeout=30)["migrations"] == []
            h.assert_matches_oracle(tmp_path)


@pytest.mark.parametrize("step", ["switching", "switched"])
def test_a_crash_at_the_switch_is_finished_at_the_next_start(
    tree: Path, tmp_path: Path, cls_model: Path, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ingestd.store.embedding.embedder

    monkeypatch.setattr(ingestd.store.embedding.embedder, "SentenceTransformerEmbedder", FakeModel)
    state = tmp_path / "state"

    def eng(**embedding: Any) -> Engine:
        cfg = load_config(None, roots=[tree], overrides={"embedding": embedding} or None)
        return Engine(cfg, state)

    def crash(_collection: str, at: str) -> None:
        if at == step:
            raise Crash

    e = eng()
    e.sync(next(iter(e.context.sources)))
    e.close()
    e = eng(model=str(cls_model), fit_model=False)  # a new model and fit_model
    e.context.hook = crash
    with pytest.raises(Crash):
        e.sync(next(iter(e.context.sources)))
    e.close()
    e = eng(model=str(cls_model), fit_model=False)
    try:
        source = next(iter(e.context.sources))
        e.sync(source)
        assert e.resources.manifest.collection_build("ingestd") is None
        assert e.verify(source).clean
        want = set(e.expected_points(source)[0])
    finally:
        e.close()
    assert physical_collections(state) == {new_version(cls_model)}
    assert set(store_snapshot(state)) == want


def git_engine(state: Path, url: str, model: str, factory: Any) -> Engine:
    source = {"kind": "git", "name": "book", "url": url, "refs": ["v1", "v2"]}
    cfg = load_config(
        None,
        overrides={"state_dir": str(state), "sources": [source], "embedding": {"model": model}},
    )
    return Engine(cfg, state, model_factory=factory)


def git_ingest(state: Path, url: str, model: str, factory: Any) -> None:
    e = git_engine(state, url, model, factory)
    try:
        e.context.source("book").refresh()  # type: ignore[attr-defined]
        assert not e.sync("book").interrupted
        assert e.verify("book").clean
    finally:
        e.close()


def test_a_migration_of_a_git_source_keeps_points_shared_by_versions(
    tmp_path: Path, scratch: Path, cls_model: Path, models: Any, one_document_per_slice: None
) -> None:
    """Two tags through a migration to another model, with the real models: the new
    version holds one point per distinct chunk, each version's view as before."""
    from ingestd.daemon.sources.versions import version_view
    from tests.gitrepos import HistoryRepo

    repo = HistoryRepo(tmp_path / "repo")
    repo.tag("v1")
    for _ in range(3):
        repo.next_commit()
    repo.tag("v2")
    repo.push()
    url = str(repo.origin)
    state = scratch / "state"
    git_ingest(state, url, BUNDLED_MODEL, models)
    before = without_provenance(store_snapshot(state))
    assert any(p["version"] == ["v1", "v2"] for p in before.values())
    git_ingest(state, url, str(cls_model), models)  # the migration, then the switch
    assert physical_collections(state) == {new_version(cls_model)}
    got = without_provenance(store_snapshot(state))
    want_state = scratch / "from-scratch"
    git_ingest(want_state, url, str(cls_model), models)
    assert got == without_provenance(store_snapshot(want_state))
    assert_same_vectors(dense_vectors(state), dense_vectors(want_state))

    def views(points: dict[str, dict[str, Any]], v: str) -> dict[str, dict[str, Any]]:
        drop = ("rule_fingerprint",)  # holds the model's fingerprint
        return {
            pid: {k: x for k, x in version_view(p, v).items() if k not in drop}
            for pid, p in points.items()
            if v in p["version"]
        }

    for v in ("v1", "v2"):  # the same chunks per version, the same fields
        assert views(got, v) == views(before, v)
    e = git_engine(state, url, str(cls_model), models)
    try:
        hits = search_cmd(e, "cargo build hello world", k=5, source="book", version="v1")
        files = repo.snapshot("v1")
        assert hits and all(h["version"] == "v1" for h in hits)
        for h in hits:
            text = files[h["path"]].decode()
            assert text[h["start_char"] : h["end_char"]] == h["text"]
    finally:
        e.close()
