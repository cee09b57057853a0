"""The graph builder: a BERT model's files read, its ONNX graph built, checked against torch.

Small random BERT models (two layers, width 32, weights drawn wide enough that every
activation and layer norm shows) are written by transformers itself, in every
activation and pooling the builder knows; their built graph, run by onnxruntime before
and after fusion, and the float64 reference must give sentence-transformers' vectors.
Models of other shapes must be refused with one line naming what differs and the
``torch`` extra. The bundled model's own graph is checked in ``test_backends.py`` and,
on 2,000 chunks of four corpora, by ``bench/graph_equivalence.py``.
"""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.store.embedding.embedder import BUNDLED_MODEL, model_info
from ingestd.store.embedding.graphs.bert import (
    ACTIVATIONS,
    TORCH_EXTRA,
    UnsupportedModelError,
    load_weights,
    read_architecture,
    unsupported,
)
from ingestd.store.embedding.graphs.bert_graph import INPUTS, OUTPUT, build_graph
from ingestd.store.embedding.graphs.bert_reference import _act, reference_vectors
from ingestd.store.embedding.graphs.recipes import RECIPES
from tests.helpers import model_the_builder_lacks

pytestmark = pytest.mark.engine("edge")  # no store involved

TEXTS = [
    "Zebra",
    "The collector receives telemetry data and exports it to one or more backends.",
    "## Configuration\n\nSet `exporters.otlp.endpoint` to the address of the collector.",
    " ".join(["Sphinx builds documentation from reStructuredText sources."] * 20),
]
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
)
_MODULES = {
    "sentence_transformers.models.Transformer": "",
    "sentence_transformers.models.Pooling": "1_Pooling",
    "sentence_transformers.models.Normalize": "2_Normalize",
}
_DENSE = "sentence_transformers.models.Dense"


def _bundled() -> Path:
    path = model_info(BUNDLED_MODEL).path
    assert path is not None
    return path


def _write_modules(folder: Path, kinds: list[str]) -> None:
    paths = {**_MODULES, _DENSE: "2_Dense"}
    chain = [{"idx": i, "name": str(i), "path": paths[k], "type": k} for i, k in enumerate(kinds)]
    (folder / "modules.json").write_text(json.dumps(chain))


def tiny_bert(
    folder: Path, *, act: str = "gelu", pooling: Any = "mean", normalize: bool = True
) -> Path:
    """A random two-layer BERT sentence-transformers model in ``folder`` (offline)."""
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=30522,  # the bundled tokenizer's
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        hidden_act=act,
        max_position_embeddings=64,
        layer_norm_eps=1e-7,
    )
    torch.manual_seed(7)
    model = BertModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if "LayerNorm.weight" in name else 0.0, 0.3)
    model.save_pretrained(folder)
    for f in _TOKENIZER_FILES:
        shutil.copyfile(_bundled() / f, folder / f)
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 64}')
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"embedding_dimension": 32, "pooling_mode": pooling})
    )
    kinds = list(_MODULES)[: 3 if normalize else 2]
    if normalize:
        (folder / "2_Normalize").mkdir()
    _write_modules(folder, kinds)
    return folder


def _encodings(folder: Path) -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.enable_truncation(max_length=64)
    tok.no_padding()
    return tok.encode_batch(TEXTS)


def _run(graph: Any, encodings: Any) -> Any:
    """The graph's vectors of the texts: one padded batch, and each text alone."""
    import onnxruntime as ort

    from ingestd.store.embedding.runtimes.onnx_runtime import pad_batch

    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    batch = session.run(None, pad_batch(encodings, INPUTS))[0]
    alone = np.stack([session.run(None, pad_batch([e], INPUTS))[0][0] for e in encodings])
    return batch, alone


def _unit(x: Any) -> Any:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _cos(a: Any, b: Any) -> Any:
    return np.sum(_unit(a) * _unit(b), axis=1)


def _sentence_transformers(folder: Path) -> Any:
    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        return st.encode(TEXTS, convert_to_numpy=True, show_progress_bar=False)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("act", "pooling", "normalize"),
    [
        ("gelu", "mean", True),
        ("gelu_new", "mean", True),
        ("gelu_pytorch_tanh", "cls", True),
        ("relu", "max", False),
        ("silu", "mean_sqrt_len_tokens", True),
        ("quick_gelu", "mean", False),
    ],
)
def test_the_built_graph_and_the_reference_make_sentence_transformers_vectors(
    tmp_path: Path, act: str, pooling: str, normalize: bool
) -> None:
    import onnx
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    folder = tiny_bert(tmp_path / "model", act=act, pooling=pooling, normalize=normalize)
    want = _sentence_transformers(folder)
    arch = read_architecture(folder)
    assert (arch.pooling, arch.normalize, arch.eps) == (pooling, normalize, 1e-7)
    weights = load_weights(arch)
    encodings = _encodings(folder)
    reference = reference_vectors(arch, weights, [(e.ids, e.type_ids) for e in encodings])
    assert _cos(reference, want).min() >= 0.999999
    if normalize:  # the chain's own normalisation, in the graph and the reference
        assert np.allclose(np.linalg.norm(reference, axis=1), 1)
    graph = build_graph(arch, weights)
    onnx.checker.check_model(graph, full_check=True)
    assert [i.name for i in graph.graph.input] == list(INPUTS)
    assert [o.name for o in graph.graph.output] == [OUTPUT]
    options = FusionOptions("bert")
    options.enable_shape_inference = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fused = optimize_model(
            build_graph(arch, weights), "bert", 4, 32, optimization_options=options, opt_level=0
        ).model
    assert {n.op_type for n in fused.graph.node} >= {"Attention", "SkipLayerNormalization"}
    for g in (graph, fused):
        batch, alone = _run(g, encodings)
        assert _cos(batch, want).min() >= 0.99999 and _cos(alone, want).min() >= 0.99999
        if not normalize:  # the scale too, not only the direction
            assert np.allclose(alone, want, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_the_bound_fails_a_graph_built_wrong(tmp_path: Path) -> None:
    """The bound a build holds its graph to fails a graph of another activation, epsilon
    or pooling. (GELU's tanh form for the exact one stays within it: 0.999999 on the
    bundled model; the forms are pinned one by one below.)"""
    folder = tiny_bert(tmp_path / "model", act="gelu")
    want = _sentence_transformers(folder)
    arch = read_architecture(folder)
    weights = load_weights(arch)
    encodings = _encodings(folder)
    wrongs = [
        replace(arch, activation="relu"),
        replace(arch, eps=1.0),
        replace(arch, pooling="cls"),
    ]
    for wrong in wrongs:
        _, alone = _run(build_graph(wrong, weights), encodings)
        assert _cos(alone, want).min() < 0.9999, wrong


@pytest.mark.slow
@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_each_activation_is_the_function_transformers_names(act: str) -> None:
    """The reference's activation equals transformers' own to float64 rounding, and the
    graph writes the operators of that form (erf, or tanh, ...)."""
    import torch
    from transformers.activations import ACT2FN

    x = np.linspace(-6, 6, 2001)
    want = ACT2FN[act](torch.from_numpy(x)).numpy()
    assert np.allclose(_act(x, ACTIVATIONS[act]), want, rtol=0, atol=1e-12), act
    arch = read_architecture(_bundled())
    ops = {n.op_type for n in build_graph(replace(arch, activation=ACTIVATIONS[act], layers=1),
                                          _one_layer(arch)).graph.node}  # fmt: skip
    form = {"gelu": "Erf", "gelu_tanh": "Tanh", "relu": "Relu", "silu": "Sigmoid"}
    expected = form.get(ACTIVATIONS[act], "Sigmoid")
    assert expected in ops and not (ops & set(form.values()) - {expected}), (act, ops)


def _one_layer(arch: Any) -> dict[str, Any]:
    """Weights of a one-layer model of the bundled model's sizes (zeros: shapes only)."""
    from ingestd.store.embedding.graphs.bert import _expected

    return {
        k: np.zeros(shape, dtype=np.float32)
        for k, shape in _expected(replace(arch, layers=1)).items()
    }


# -- what the builder refuses, and reads (fast: JSON files only) ------------------------------


def _bundled_copy(tmp: Path) -> Path:
    """The bundled model's JSON files, and its weights as a symlink."""
    dest = tmp / "model"
    for f in _bundled().rglob("*"):
        if f.is_file():
            target = dest / f.relative_to(_bundled())
            target.parent.mkdir(parents=True, exist_ok=True)
            if f.suffix == ".safetensors":
                target.symlink_to(f)
            else:
                shutil.copyfile(f, target)
    return dest


def _edit(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda m: _edit(m / "config.json", model_type="roberta"), "it is a roberta, not a bert"),
        (
            lambda m: _edit(m / "config.json", position_embedding_type="relative_key"),
            "its position embeddings are relative_key",
        ),
        (lambda m: _edit(m / "config.json", hidden_act="gelu_10"), "its activation 'gelu_10'"),
        (
            lambda m: _edit(m / "1_Pooling/config.json", pooling_mode="weightedmean"),
            "its pooling weightedmean",
        ),
        (
            lambda m: _edit(m / "1_Pooling/config.json", pooling_mode=["cls", "mean"]),
            "its pooling cls+mean",
        ),
        (
            lambda m: _write_modules(m, [*_MODULES][:2] + [_DENSE]),
            "its module chain is Transformer -> Pooling -> Dense",
        ),
        (
            lambda m: (m / "model.safetensors").rename(m / "pytorch_model.bin"),
            "its weights are in pytorch_model.bin (a torch pickle)",
        ),
    ],
)
def test_a_model_of_another_shape_is_refused_in_one_line_naming_the_torch_extra(
    tmp_path: Path, change: Any, said: str
) -> None:
    model = _bundled_copy(tmp_path)
    assert unsupported(model) is None
    change(model)
    with pytest.raises(UnsupportedModelError) as err:
        read_architecture(model)
    line = str(err.value)
    assert said in line and line.endswith(TORCH_EXTRA) and "\n" not in line
    assert unsupported(model) == line


def test_pooling_configs_read_as_sentence_transformers_reads_them(tmp_path: Path) -> None:
    model = _bundled_copy(tmp_path)
    arch = read_architecture(model)  # the legacy booleans: mean only
    assert (arch.pooling, arch.normalize, arch.activation) == ("mean", True, "gelu")
    assert (arch.layers, arch.hidden, arch.heads, arch.eps) == (6, 384, 12, 1e-12)
    (model / "1_Pooling/config.json").write_text('{"pooling_mode_cls_token": true}')
    assert read_architecture(model).pooling == "cls"
    (model / "1_Pooling/config.json").write_text('{"word_embedding_dimension": 384}')
    assert read_architecture(model).pooling == "mean"  # none named: mean
    (model / "modules.json").unlink()  # a plain transformers folder: mean, not normalised
    assert (read_architecture(model).pooling, read_architecture(model).normalize) == ("mean", False)


def test_weights_with_a_head_prefix_or_old_layer_norm_names_load_and_a_missing_one_is_named(
    tmp_path: Path,
) -> None:
    from safetensors.numpy import save_file

    arch = read_architecture(_bundled())
    weights = load_weights(arch)
    renamed = {
        "bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma"): v for k, v in weights.items()
    }
    renamed["cls.predictions.bias"] = np.zeros(3, dtype=np.float32)  # a head, not read
    path = tmp_path / "model.safetensors"
    save_file(renamed, str(path))
    got = load_weights(replace(arch, weights=path))
    assert got.keys() == weights.keys()
    assert all(np.array_equal(got[k], weights[k]) for k in weights)
    del renamed["bert.encoder.layer.3.output.dense.bias"]
    save_file(renamed, str(path))
    with pytest.raises(
        UnsupportedModelError, match=r"lacks encoder\.layer\.3\.output\.dense\.bias$"
    ):
        load_weights(replace(arch, weights=path))


def test_the_onnx_backends_export_a_model_the_builder_lacks_through_torch(tmp_path: Path) -> None:
    model = model_the_builder_lacks(tmp_path / "model")
    for backend in ("onnx", "openvino", "onnx-int8"):
        info = model_info(str(model), backend)
        assert info.recipe == RECIPES[backend].through_torch
        assert info.recipe.exporter == "torchscript" and info.recipe.builder == 0
    bundled = model_info(BUNDLED_MODEL, "onnx")
    assert bundled.recipe == RECIPES["onnx"] and bundled.recipe.exporter == "builder"
    # the float32 backends' vectors are the files' whichever way the graph is made
    assert model_info(str(model), "onnx").fingerprint == model_info(str(model)).fingerprint
