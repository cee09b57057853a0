"""Embedding backends: selection from the config, fingerprints, the ONNX export and its vectors.

The export runs once per test session (``onnx_export`` fixture) with every network
connection refused; the tests that need it reuse its cache folder or a copy of it.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.daemon.config import ConfigError, load_config
from ingestd.daemon.config.models import default_backend
from ingestd.store.embedding.backends import INT8_SETTINGS, RECIPES, backend_fingerprint
from ingestd.store.embedding.embedder import (
    BUNDLED_MODEL,
    SentenceTransformerEmbedder,
    load_embedder,
    model_info,
)
from ingestd.store.embedding.graphs import onnx_cache, onnx_export
from ingestd.store.embedding.graphs.onnx_export import (
    cached_export,
    ensure_artifact,
    ensure_exported,
)
from ingestd.store.embedding.runtimes.cpu import native_bf16
from ingestd.store.embedding.runtimes.onnx import OnnxEmbedder
from ingestd.store.embedding.runtimes.onnx_runtime import load_tokenizer
from tests.helpers import MD_DOCS, REPO, wait_for

#: The fingerprint of the bundled model's files, as stores made before backends
#: existed recorded it: the torch backend must keep it.
TORCH_FINGERPRINT = "42eee4b0444c09937db3497dbc4ab08fa91629a4d8db6b6e63cca93f76c49a9b"
#: The fingerprint ``onnx`` stores of the bundled model recorded before ``onnx`` took
#: torch's (its float32 graph makes torch's vectors).
ONNX_FINGERPRINT_BEFORE = "0d68fa3d6997fcd6153458a68d3c0c5d4a5097d09560342a629bd7142467b83b"
#: The fingerprint of ``onnx-int8`` stores of the bundled model before the graph builder.
INT8_FINGERPRINT_BEFORE = "2279a6e017d0ca808a3e6226e9fca0ed67710b30cdcfdc7ca448226e6c425483"


# -- selection and fingerprints (fast) -------------------------------------------------------


def test_backend_is_chosen_in_the_config(tmp_path: Path) -> None:
    from ingestd.daemon.engine import Engine

    default = load_config(None)
    # the test extra installs the openvino extra: the default wherever it is installed
    assert default.embedding.backend == "openvino"
    assert load_config(None, overrides={"embedding": {"device": "cuda"}}).embedding.backend == (
        "torch"
    )
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text("embedding:\n  backend: onnx-int8\n  cache_dir: models\n")
    cfg = load_config(cfg_file)
    assert cfg.embedding.backend == "onnx-int8"
    assert cfg.embedding.cache_dir == tmp_path / "models"  # relative to the config file
    eng = Engine(cfg, tmp_path / "state")
    try:
        assert eng.profiles.profile.model.backend == "onnx-int8"
        assert (
            eng.profiles.profile.model.fingerprint
            == model_info(BUNDLED_MODEL, "onnx-int8").fingerprint
        )
        model = eng.profiles.profile.embed_model()
        assert isinstance(model, OnnxEmbedder) and not model.loaded  # nothing loaded yet
        assert model.cache_dir == tmp_path / "models"
    finally:
        eng.close()
    torch_cfg = load_config(None, overrides={"embedding": {"backend": "torch"}})
    eng = Engine(torch_cfg, tmp_path / "state2")
    try:
        assert isinstance(eng.profiles.profile.embed_model(), SentenceTransformerEmbedder)
    finally:
        eng.close()


def test_unknown_backend_and_gpu_onnx_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"embedding\.backend: Input should be 'torch'"):
        load_config(None, overrides={"embedding": {"backend": "tensorrt"}})
    with pytest.raises(ConfigError, match="runs on the CPU; set device: cpu"):
        load_config(None, overrides={"embedding": {"backend": "onnx", "device": "cuda"}})


def test_missing_onnxruntime_is_a_config_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "onnxruntime" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides={"embedding": {"backend": "onnx"}})
    assert str(err.value).startswith("embedding.backend: backend 'onnx' needs onnxruntime")
    assert "pip install onnxruntime onnx" in str(err.value)
    load_config(None)  # torch needs neither


def test_torch_keeps_the_fingerprint_of_the_files() -> None:
    torch = model_info(BUNDLED_MODEL)
    assert torch.fingerprint == TORCH_FINGERPRINT == torch.files_fingerprint
    assert model_info(BUNDLED_MODEL, "torch") == torch
    assert torch.label == BUNDLED_MODEL


def test_onnx_shares_torchs_fingerprint_and_int8_has_one_per_recipe_setting() -> None:
    """The float32 graph makes torch's vectors (the export checks it): one fingerprint."""
    fps = {b: model_info(BUNDLED_MODEL, b).fingerprint for b in ("torch", "onnx", "onnx-int8")}
    assert fps["onnx"] == fps["torch"] == TORCH_FINGERPRINT != fps["onnx-int8"]
    # the fingerprint onnx had before is an alias of it (a store recorded so is taken over)
    from ingestd.store.embedding.backends import backend_spec

    # the fingerprint earlier versions recorded for onnx stores of the bundled model
    assert backend_spec("onnx").aliases(TORCH_FINGERPRINT) == (ONNX_FINGERPRINT_BEFORE,)
    # and for int8 stores, whose graph was quantised from the one torch exported: the
    # same vectors bit for bit (the built and the exported graph make the same)
    assert backend_spec("onnx-int8").aliases(TORCH_FINGERPRINT) == (INT8_FINGERPRINT_BEFORE,)
    assert fps["onnx-int8"] != INT8_FINGERPRINT_BEFORE
    assert model_info(BUNDLED_MODEL, "onnx-int8").label == f"{BUNDLED_MODEL} (onnx-int8)"
    int8 = RECIPES["onnx-int8"]
    changed = [
        replace(int8, quant=replace(INT8_SETTINGS, pre_process=False)),
        replace(int8, quant=replace(INT8_SETTINGS, per_channel=False)),
        replace(int8, quant=replace(INT8_SETTINGS, reduce_range=True)),
        replace(int8, quant=replace(INT8_SETTINGS, weight_type="QUInt8")),
        replace(int8, quant=replace(INT8_SETTINGS, op_types=("MatMul",))),
        replace(int8, quant=replace(INT8_SETTINGS, exclude=("/output/dense/",))),
        replace(int8, opset=18),
        replace(int8, fusion=None),
    ]
    got = {backend_fingerprint(TORCH_FINGERPRINT, "onnx-int8", r) for r in changed}
    assert len(got) == len(changed) and fps["onnx-int8"] not in got
    assert model_info(BUNDLED_MODEL, "onnx-int8", changed[1]).fingerprint in got


def test_collection_filled_by_another_backend_is_refused(tmp_path: Path) -> None:
    from ingestd.store.manifest.manifest import Manifest, ModelMismatchError, sqlite_url

    torch, int8 = model_info(BUNDLED_MODEL), model_info(BUNDLED_MODEL, "onnx-int8")
    m = Manifest(sqlite_url(tmp_path / "manifest.db"))
    try:
        m.check_collection("docs", torch.label, torch.fingerprint, torch.dim)
        with pytest.raises(ModelMismatchError, match=r"configured model is 'all-MiniLM-L6-v2 \("):
            m.check_collection("docs", int8.label, int8.fingerprint, int8.dim)
    finally:
        m.close()


def test_status_names_the_backend_and_its_fingerprint(tmp_path: Path) -> None:
    from ingestd.daemon.commands.status import status_of
    from tests.helpers import copy_tree, make_engine

    tree = copy_tree(tmp_path / "docs", ["docs/concepts/glossary.md"])
    int8 = model_info(BUNDLED_MODEL, "onnx-int8")
    eng = make_engine(tree, tmp_path / "state", _no, embedding={"backend": "onnx-int8"})
    try:
        got = status_of(eng.resources.manifest, eng, tmp_path / "state")["model"]
    finally:
        eng.close()
    assert got == {
        "name": BUNDLED_MODEL,
        "backend": "onnx-int8",
        "fingerprint": int8.fingerprint[:16],
    }


def test_tokenizer_truncates_at_max_seq_length_like_the_model() -> None:
    info = model_info(BUNDLED_MODEL)
    tok = load_tokenizer(info)
    long = (MD_DOCS / "docs/collector/architecture.md").read_text()
    enc = tok.encode(long)
    assert len(enc.ids) == info.max_seq_length == 256  # specials included
    assert enc.ids[0] == tok.token_to_id("[CLS]") and enc.ids[-1] == tok.token_to_id("[SEP]")
    assert len(tok.encode("Zebra").ids) == 3  # no padding to the file's fixed 128


# -- the cached artifact: atomic, locked, verified (fast, no model) ---------------------------


def _writer(payload: bytes) -> Any:
    calls: list[Path] = []

    def build(tmp: Path) -> dict[str, Any]:
        calls.append(tmp)
        tmp.write_bytes(payload)
        return {"what": "test"}

    build.calls = calls  # type: ignore[attr-defined]
    return build


def test_artifact_is_built_once_then_reused(tmp_path: Path) -> None:
    path = tmp_path / "onnx" / "m.onnx"
    build = _writer(b"graph bytes")
    first = ensure_artifact(path, build)
    second = ensure_artifact(path, build)
    assert len(build.calls) == 1 and first == second
    assert path.read_bytes() == b"graph bytes" and first["bytes"] == 11
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.json", "m.onnx", "m.onnx.lock"]


@pytest.mark.parametrize("damage", ["truncated", "flipped", "no record", "bad record"])
def test_partial_or_corrupt_artifact_is_rebuilt(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "m.onnx"
    ensure_artifact(path, _writer(b"0123456789"))
    if damage == "truncated":
        path.write_bytes(b"01234")
    elif damage == "flipped":
        path.write_bytes(b"0123456788")
    elif damage == "no record":  # killed between the two renames
        path.with_suffix(".json").unlink()
    else:
        path.with_suffix(".json").write_text("{")
    (tmp_path / "m.onnx.x1y2.tmp").write_bytes(b"left by a killed build")
    build = _writer(b"0123456789")
    record = ensure_artifact(path, build)
    assert len(build.calls) == 1 and path.read_bytes() == b"0123456789"
    assert record["bytes"] == 10 and not list(tmp_path.glob("*.tmp"))


def test_failed_build_leaves_the_cache_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"

    def broken(tmp: Path) -> dict[str, Any]:
        tmp.write_bytes(b"half")
        raise RuntimeError("export failed")

    with pytest.raises(RuntimeError, match="export failed"):
        ensure_artifact(path, broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx.lock"]


def test_two_processes_building_at_once_build_once(tmp_path: Path) -> None:
    """Both get the same complete file; the second waits for the first and reuses it."""
    script = textwrap.dedent(
        """
        import os, sys, time
        from pathlib import Path
        from ingestd.store.embedding.graphs.onnx_export import ensure_artifact

        path, log = Path(sys.argv[1]), Path(sys.argv[2])
        go = Path(sys.argv[3])
        while not go.exists():
            time.sleep(0.01)

        def build(tmp):
            with log.open("a") as f:
                f.write(f"{os.getpid()}\\n")
            with tmp.open("wb") as f:
                for _ in range(20):  # slow enough that the other process must wait
                    f.write(os.urandom(1 << 16))
                    time.sleep(0.02)
            return {}

        print(ensure_artifact(path, build)["sha256"])
        """
    )
    path, log, go = tmp_path / "m.onnx", tmp_path / "builds.log", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), str(log), str(go)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for _ in range(2)
    ]
    go.touch()
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert len(log.read_text().split()) == 1  # built once
    assert outs[0] == outs[1] == onnx_cache._sha256(path)
    assert path.stat().st_size == 20 << 16


# -- the real export (once per session, offline) ----------------------------------------------


def _no(texts: Any) -> Any:
    raise AssertionError("must not embed")


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
@pytest.mark.parametrize(
    ("backend", "precision", "bound"),
    [("onnx", None, 0.9999), ("openvino", "f32", 0.9999), ("openvino", "bf16", 0.999)],
)
def test_the_built_graphs_vectors_equal_sentence_transformers_vectors(
    onnx_export_dir: Path,
    chunks_and_torch: tuple[list[str], Any],
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    precision: str | None,
    bound: float,
) -> None:
    """The graph built from the weights, under onnxruntime and OpenVINO in float32, makes
    sentence-transformers' vectors of real chunks of the four corpora (and of whole pages,
    truncated) to cosine 0.9999; OpenVINO in bfloat16 to the invariant's 0.999.
    (``bench/graph_equivalence.py``: 500 chunks of each corpus.)"""
    from ingestd.store.embedding.runtimes import openvino

    if precision == "bf16" and not native_bf16():
        pytest.skip("this CPU has no native bfloat16")
    monkeypatch.setattr(openvino, "native_bf16", lambda: precision == "bf16")
    texts, want = chunks_and_torch
    info = model_info(BUNDLED_MODEL, backend)
    assert info.recipe is not None and info.recipe.exporter == "builder"
    model = load_embedder(info, cache_dir=onnx_export_dir)
    got = model(texts)
    assert getattr(model, "precision", None) == precision
    assert got.shape == want.shape == (len(texts), 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    cos = np.sum(got * want, axis=1)
    assert cos.min() >= bound, f"min cosine {cos.min():.6f} over {len(texts)} texts"


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
def test_the_probe_vectors_a_built_graph_records_are_sentence_transformers_vectors(
    onnx_export_dir: Path, real_model: Any
) -> None:
    """The float64 reference OpenVINO checks itself against at each load is torch's."""
    path = cached_export(model_info(BUNDLED_MODEL, "onnx"), onnx_export_dir)
    assert path is not None
    record = onnx_export.export_record(path)
    assert record is not None and record["reference"] == "float64 forward pass"
    probe = np.asarray(record["probe_vectors"], dtype=np.float32)
    cos = np.sum(probe * real_model(list(onnx_export.PROBE_TEXTS)), axis=1)
    assert cos.min() >= 0.99999, cos


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
def test_int8_vectors_are_close_to_torch_and_never_depend_on_the_batch(
    onnx_export_dir: Path, chunks_and_torch: tuple[list[str], Any]
) -> None:
    texts, want = chunks_and_torch
    model = load_embedder(model_info(BUNDLED_MODEL, "onnx-int8"), cache_dir=onnx_export_dir)
    got = model(texts)
    cos = np.sum(got * want, axis=1)
    assert cos.mean() >= 0.99 and cos.min() >= 0.97, (cos.mean(), cos.min())
    alone = model([texts[5]])
    assert np.array_equal(alone[0], got[5])  # the same bits, whatever its neighbours


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_unload_while_other_threads_embed_gives_the_same_vectors(
    onnx_export_dir: Path, chunks_and_torch: tuple[list[str], Any], backend: str
) -> None:
    import threading

    texts, _ = chunks_and_torch
    texts = texts[:6]
    model = load_embedder(model_info(BUNDLED_MODEL, backend), cache_dir=onnx_export_dir)
    want = model(texts)
    got: list[Any] = []
    errors: list[BaseException] = []

    def embed() -> None:
        try:
            for _ in range(3):
                got.append(model(texts))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=embed) for _ in range(2)]
    for w in workers:
        w.start()
    unloads = 0
    while any(w.is_alive() for w in workers):
        unloads += model.unload()
        workers[0].join(0.02)
    for w in workers:
        w.join()
    assert not errors, errors
    assert len(got) == 6 and all(np.array_equal(g, want) for g in got)
    assert unloads >= 1
    model.unload()
    assert not model.loaded and model.unload() is False
    model(["loaded again"])
    assert model.loaded


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
def test_second_load_reuses_the_export(
    onnx_export_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: Any) -> Any:
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_export, "_make_float32", fail)
    monkeypatch.setattr(onnx_export, "_quantise", fail)
    model = load_embedder(model_info(BUNDLED_MODEL, "onnx-int8"), cache_dir=onnx_export_dir)
    model(["reused"])
    assert model.loaded and model.path is not None
    record = json.loads(model.path.with_suffix(".json").read_text())
    assert record["recipe"]["quant"]["per_channel"] is INT8_SETTINGS.per_channel
    assert record["probe_cosine"]["min"] >= 0.97


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
def test_damaged_int8_export_is_rebuilt_from_the_cached_float32(
    onnx_export_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(onnx_export_dir, cache)
    info = model_info(BUNDLED_MODEL, "onnx-int8")
    path, record = ensure_exported(info, cache)
    with path.open("r+b") as f:  # a partial file under the final name
        f.truncate(record["bytes"] // 2)

    def fail(*args: Any) -> Any:
        raise AssertionError("the float32 export is intact and must be reused")

    monkeypatch.setattr(onnx_export, "_make_float32", fail)
    model = load_embedder(info, cache_dir=cache)
    vec = model(["The collector receives telemetry."])
    assert path.stat().st_size == record["bytes"] and vec.shape == (1, 384)


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
def test_export_model_command_reports_the_cached_export(onnx_export_dir: Path) -> None:
    from click.testing import CliRunner

    from ingestd.daemon.cli.main import cli

    res = CliRunner().invoke(
        cli,
        ["export-model", "--backend", "onnx-int8"],
        env={"CACHE_DIRECTORY": str(onnx_export_dir)},
    )
    assert res.exit_code == 0, res.output
    assert "-int8-" in res.output and "cosine to the reference on probe texts" in res.output
    res = CliRunner().invoke(
        cli,
        ["export-model", "--backend", "openvino"],
        env={"CACHE_DIRECTORY": str(onnx_export_dir)},
    )
    assert res.exit_code == 0, res.output
    precision = "bf16" if native_bf16() else "f32"
    assert f"OpenVINO runs it in {precision}: cosine to the reference on probe texts, min 0.99" in (
        res.output
    )
    torch_cfg = onnx_export_dir.parent / "torch.yaml"
    torch_cfg.write_text("embedding:\n  backend: torch\n")
    res = CliRunner().invoke(cli, ["export-model", "--config", str(torch_cfg)])
    assert res.exit_code == 2 and "needs no export" in res.output


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
def test_a_model_the_builder_does_not_know_is_exported_through_torch(tmp_path: Path) -> None:
    """``export-model`` takes the other path for a model of another shape (here the
    bundled model with weighted-mean pooling): torch exports it, and the graph gives
    sentence-transformers' vectors of that model."""
    from click.testing import CliRunner

    from ingestd.daemon.cli.main import cli
    from ingestd.store.embedding.runtimes.sentence_transformer import SentenceTransformerEmbedder
    from tests.helpers import model_the_builder_lacks

    model = model_the_builder_lacks(tmp_path / "model")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"embedding:\n  model: {model}\n  backend: onnx\n")
    env = {"CACHE_DIRECTORY": str(tmp_path / "cache")}
    res = CliRunner().invoke(cli, ["export-model", "--config", str(cfg)], env=env)
    assert res.exit_code == 0, res.output
    assert "exported by torch" in res.output
    info = model_info(str(model), "onnx")
    assert info.recipe == THROUGH_TORCH
    texts = ["The collector receives telemetry.", "Zebra", "Ownership rules in Rust."]
    got = load_embedder(info, cache_dir=tmp_path / "cache")(texts)
    want = SentenceTransformerEmbedder(model_info(str(model)))(texts)
    assert np.sum(got * want, axis=1).min() >= 0.9999


@pytest.mark.slow
def test_int8_backend_end_to_end_incremental_equals_from_scratch(
    onnx_export_dir: Path, tmp_path: Path
) -> None:
    """Configured backend, real export, engine, store: kept vectors equal fresh ones bit for bit."""
    from ingestd.daemon.commands.query.search import search as search_cmd
    from tests.helpers import copy_tree, make_engine, state_dense_vectors, store_snapshot

    tree = copy_tree(
        tmp_path / "docs", ["docs/concepts/glossary.md", "docs/collector/quick-start.md"]
    )
    backend = {"backend": "onnx-int8", "cache_dir": str(onnx_export_dir)}
    state = tmp_path / "state"
    eng = make_engine(tree, state, None, embedding=backend)
    (name,) = eng.context.sources
    eng.sync(name)
    p = tree / "docs/collector/quick-start.md"
    p.write_text(p.read_text() + "\n\n## Appendix\n\nThe collector can also run as a sidecar.\n")
    eng.sync(name)
    hits = search_cmd(eng, "what is an attribute in OpenTelemetry", k=3)
    assert hits and hits[0]["path"] == "docs/concepts/glossary.md"
    eng.close()
    fresh = tmp_path / "fresh"
    eng = make_engine(tree, fresh, None, embedding=backend)
    eng.sync(name)
    eng.close()
    ids = sorted(store_snapshot(fresh))
    assert ids == sorted(store_snapshot(state))
    va, vb = state_dense_vectors(state), state_dense_vectors(fresh)
    assert set(va) == set(vb) == set(ids)
    assert all(np.allclose(va[i], vb[i], atol=1e-6) for i in ids)
    # the default backend now: the collection holds int8 vectors
    eng = make_engine(tree, state, None, embedding={"cache_dir": str(onnx_export_dir)})
    try:
        # searched with the profile that made it until a migration switches it (docs/guides/
        # embedding-model.md); its vectors are never mixed with the default's
        assert eng.profiles.profile.model.backend == default_backend()
        assert eng.profiles.profile_of("ingestd").model.backend == "onnx-int8"
    finally:
        eng.close()


#: The bundled model's float32 recipe with its graph exported through torch, as every
#: model the builder does not know gets it (and as the bundled model got it before).
THROUGH_TORCH = RECIPES["onnx"].through_torch


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
def test_a_first_query_waits_for_the_built_graph_made_in_a_process_of_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A BERT model's graph is built without torch, so nothing embeds meanwhile: the
    first text waits for the build, which runs in a child process (its memory is not
    this process's), and the graph embeds it."""
    caplog.set_level(logging.INFO, logger="ingestd")
    info = model_info(BUNDLED_MODEL, "onnx")
    assert info.recipe == RECIPES["onnx"] and info.recipe.exporter == "builder"
    emb = OnnxEmbedder(info, cache_dir=tmp_path / "cache")
    assert not emb.background_export
    out = emb(["The collector receives telemetry."])
    assert out.shape == (1, 384) and emb.loaded_graph and emb.path is not None
    assert cached_export(info, tmp_path / "cache") == emb.path
    record = json.loads(emb.path.with_suffix(".json").read_text())
    assert record["reference"] == "float64 forward pass"
    assert record["probe_cosine"]["min"] >= onnx_export.MIN_BUILT_COSINE
    assert "peak memory" in caplog.text  # the child's last line, logged here


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
def test_a_query_is_embedded_by_torch_and_starts_no_export(tmp_path: Path) -> None:
    """A graph exported through torch: one text (a search's query) before the graph is
    made is embedded by torch and no export starts, so a one-shot ``ingestd search``
    leaves nothing running behind it."""
    info = model_info(BUNDLED_MODEL, "onnx", THROUGH_TORCH)
    emb = OnnxEmbedder(info, cache_dir=tmp_path / "cache")
    assert emb.background_export
    out = emb(["The collector receives telemetry."])
    assert out.shape == (1, 384) and abs(float(np.linalg.norm(out[0])) - 1) < 1e-4
    assert not emb.exporting and not emb.loaded_graph
    assert cached_export(info, tmp_path / "cache") is None


@pytest.mark.slow
@pytest.mark.engine("edge")  # no store involved
def test_a_failed_background_export_is_said_once_and_torch_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ingestd")
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be\n")
    emb = OnnxEmbedder(model_info(BUNDLED_MODEL, "onnx", THROUGH_TORCH), cache_dir=blocked)
    texts = ["The collector receives telemetry.", "Spans are batched before export."]
    emb.load()  # what the daemon does at start: the export starts
    wait_for(lambda: emb.export_failed is not None, 300, "the export to fail")
    for _ in range(3):
        out = emb(texts)
        assert out.shape == (2, 384)
    assert not emb.exporting and not emb.loaded_graph
    assert caplog.text.count("the ONNX export of all-MiniLM-L6-v2 failed") == 1
