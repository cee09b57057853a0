"""The ``openvino`` backend: the ONNX graph compiled by OpenVINO, bfloat16 where the CPU has it.

Real OpenVINO and the real bundled model (the graph the ``onnx_export_dir`` fixture
exported once): its vectors are torch's within the bound, never depend on a text's
neighbours, and where the probe check fails onnxruntime runs the graph instead.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.store.embedding.embedder import BUNDLED_MODEL, load_embedder, model_info
from ingestd.store.embedding.graphs import onnx_export
from ingestd.store.embedding.graphs.onnx_export import cached_export
from ingestd.store.embedding.runtimes.cpu import BF16_ENV, native_bf16
from ingestd.store.embedding.runtimes.openvino import OpenVinoEmbedder

pytestmark = pytest.mark.engine("edge")  # no store involved


def test_openvino_shares_torchs_fingerprint() -> None:
    fps = {b: model_info(BUNDLED_MODEL, b).fingerprint for b in ("torch", "onnx", "openvino")}
    assert len(set(fps.values())) == 1
    info = model_info(BUNDLED_MODEL, "openvino")
    assert info.recipe == model_info(BUNDLED_MODEL, "onnx").recipe  # the same graph file


@pytest.mark.slow
def test_vectors_never_depend_on_the_neighbours_and_repeat_bit_for_bit(
    onnx_export_dir: Path, chunks_and_torch: tuple[list[str], Any]
) -> None:
    texts, _ = chunks_and_torch
    model = load_embedder(model_info(BUNDLED_MODEL, "openvino"), cache_dir=onnx_export_dir)
    assert isinstance(model, OpenVinoEmbedder)
    got = model(texts)
    assert model.precision == ("bf16" if native_bf16() else "f32")
    for i in (0, 5, len(texts) - 1):  # alone, and among others in another order
        assert np.array_equal(model([texts[i]])[0], got[i])
    assert np.array_equal(model(texts[::-1])[::-1], got)


def _copy_graph(src: Path, dst: Path) -> Path:
    path = cached_export(model_info(BUNDLED_MODEL, "onnx"), src)
    assert path is not None
    shutil.copytree(src, dst)
    return dst / path.relative_to(src)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["bound missed", "no probe vectors", "compile fails"])
def test_a_graph_that_misses_the_bound_is_run_by_onnxruntime(
    onnx_export_dir: Path,
    chunks_and_torch: tuple[list[str], Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fault: str,
) -> None:
    texts, want = chunks_and_torch
    cache = tmp_path / "cache"
    graph = _copy_graph(onnx_export_dir, cache)
    if fault == "bound missed":  # no cosine reaches it: as if bfloat16 lost too much
        monkeypatch.setattr(onnx_export, "MIN_FLOAT32_COSINE", 1.01)
    elif fault == "compile fails":
        import openvino

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("Exception from src/inference: unsupported operation")

        monkeypatch.setattr(openvino.Core, "compile_model", refuse)
    else:
        record = json.loads(graph.with_suffix(".json").read_text())
        del record["probe_vectors"]
        graph.with_suffix(".json").write_text(json.dumps(record))
    model = load_embedder(model_info(BUNDLED_MODEL, "openvino"), cache_dir=cache)
    onnx = load_embedder(model_info(BUNDLED_MODEL, "onnx"), cache_dir=onnx_export_dir)
    with caplog.at_level(logging.WARNING):
        got = model(texts[:8])
        model(texts[8:10])
        assert model.unload()  # as after keep_alive_s: the reload says nothing more
        model(texts[10:12])
    assert isinstance(model, OpenVinoEmbedder) and model.precision == "onnxruntime"
    said = [r.getMessage() for r in caplog.records if "OpenVINO is not used" in r.getMessage()]
    assert len(said) == 1 and "onnxruntime runs the same graph" in said[0]
    assert ("cosine" in said[0]) == (fault == "bound missed")
    assert ("unsupported operation" in said[0]) == (fault == "compile fails")
    assert np.allclose(got, onnx(texts[:8]), atol=1e-6)  # onnxruntime's vectors
    assert np.sum(got * want[:8], axis=1).min() >= 0.999


@pytest.mark.slow
def test_a_bf16_cpu_without_openvino_embeds_with_onnx_and_says_so_once(
    onnx_export_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import importlib.util

    from ingestd.daemon.commands.query.search import search as search_cmd
    from ingestd.daemon.sync.profiles import profiles
    from tests.helpers import copy_tree, make_engine

    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "openvino" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setenv(BF16_ENV, "1")
    monkeypatch.setattr(profiles, "_fallback_said", False)  # once per process
    tree = copy_tree(tmp_path / "docs", ["docs/concepts/glossary.md"])
    with caplog.at_level(logging.INFO):
        for state in ("a", "b"):
            eng = make_engine(
                tree, tmp_path / state, None, embedding={"cache_dir": str(onnx_export_dir)}
            )
            try:
                assert eng.profiles.profile.model.backend == "onnx"
                eng.sync(next(iter(eng.context.sources)))
                hits = search_cmd(eng, "what is an attribute in OpenTelemetry", k=3)
                assert hits and hits[0]["path"] == "docs/concepts/glossary.md"
            finally:
                eng.close()
    said = [r.getMessage() for r in caplog.records if "OpenVINO, which" in r.getMessage()]
    assert said == [
        "embedding with onnxruntime: OpenVINO, which embeds about 3 times as fast on this "
        "CPU (it has bfloat16), is not installed here; it comes with the openvino extra: "
        "`pip install 'ingestd[openvino]'` (in a clone of the repository: "
        "`pip install '.[openvino]'`)"
    ]


def test_inputs_are_padded_to_a_bucket_of_word_pieces() -> None:
    from ingestd.store.embedding.runtimes.openvino import BUCKET_TOKENS, bucketed

    ids = np.arange(1, 38, dtype=np.int64)[None, :]  # 37 word pieces
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    out = bucketed(feed)
    assert out["input_ids"].shape == out["attention_mask"].shape == (1, 2 * BUCKET_TOKENS)
    assert np.array_equal(out["input_ids"][0, :37], ids[0]) and not out["input_ids"][0, 37:].any()
    assert out["attention_mask"].sum() == 37  # the padding is masked out
    whole = {"input_ids": np.ones((1, BUCKET_TOKENS), dtype=np.int64)}
    assert bucketed(whole) is whole
