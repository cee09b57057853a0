"""What the CPU can do, and the default backend and runtime settings it decides.

Most CPUs lack native bfloat16 (AMX, AVX512-BF16). ``$INGESTD_CPU_BF16=0`` makes any
CPU act as one of them, so the default of such a CPU is pinned here with the real
bundled model, on whatever CPU runs the tests.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingestd.daemon.config.embedding import EmbeddingConfig, default_backend
from ingestd.store.embedding.embedder import BUNDLED_MODEL, load_embedder, model_info
from ingestd.store.embedding.runtimes.cpu import BF16_ENV, cpu_flags, native_bf16
from ingestd.store.embedding.runtimes.onnx import OnnxEmbedder
from ingestd.store.embedding.runtimes.onnx_runtime import longest_first
from ingestd.store.embedding.runtimes.openvino import OpenVinoEmbedder, OpenVinoSession

pytestmark = pytest.mark.engine("edge")  # no store involved

FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov avx2 avx512f"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [(FLAGS, False), (FLAGS + " amx_tile amx_bf16", True), (FLAGS + " avx512_bf16", True)],
)
def test_native_bf16_reads_the_cpu_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: str, expected: bool
) -> None:
    monkeypatch.delenv(BF16_ENV, raising=False)
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\nbogomips\t: 1\n")
    assert cpu_flags(cpuinfo) == frozenset(flags.split())
    assert native_bf16(cpu_flags(cpuinfo)) is expected
    assert cpu_flags(tmp_path / "missing") == frozenset()
    assert native_bf16(frozenset()) is False


def test_the_environment_overrides_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BF16_ENV, "0")
    assert native_bf16() is False
    assert native_bf16(FLAGS.split() + ["avx512_bf16"]) is True  # given flags are the answer
    monkeypatch.setenv(BF16_ENV, "1")
    assert native_bf16() is True
    monkeypatch.setenv(BF16_ENV, "yes")
    with pytest.raises(ValueError, match="INGESTD_CPU_BF16 must be 0 or 1"):
        native_bf16()
    monkeypatch.setenv(BF16_ENV, "")
    assert native_bf16() is native_bf16(cpu_flags())


def _without_openvino(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``openvino`` look uninstalled (as in the default install, without its extra)."""
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "openvino" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize("bf16", ["0", "1"])
@pytest.mark.parametrize(("openvino", "expected"), [(True, "openvino"), (False, "onnx")])
def test_the_default_backend_is_openvino_where_installed_with_or_without_bf16(
    monkeypatch: pytest.MonkeyPatch, bf16: str, openvino: bool, expected: str
) -> None:
    """OpenVINO is the faster in float32 too (bench/ingest.py); onnx without the extra."""
    monkeypatch.setenv(BF16_ENV, bf16)
    if not openvino:
        _without_openvino(monkeypatch)
    assert default_backend() == expected
    assert EmbeddingConfig().backend == expected
    assert default_backend("cuda") == "torch"


@pytest.mark.slow
def test_on_a_cpu_without_bf16_the_default_makes_torchs_vectors_in_float32(
    onnx_export_dir: Path,
    chunks_and_torch: tuple[list[str], Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Most laptops' default, OpenVINO in float32, and onnx without the extra: bound 0.9999."""
    texts, want = chunks_and_torch
    monkeypatch.setenv(BF16_ENV, "0")
    backend = EmbeddingConfig().backend
    assert backend == "openvino"
    for name in (backend, "onnx"):
        model = load_embedder(model_info(BUNDLED_MODEL, name), cache_dir=onnx_export_dir)
        got = model(texts)
        if name == "openvino":  # computed in float32, not run by onnxruntime instead
            assert isinstance(model, OpenVinoEmbedder) and model.precision == "f32"
        cos = np.sum(got * want, axis=1)
        assert cos.min() >= 0.9999, f"{name}: min cosine {cos.min():.6f} over {len(texts)} texts"
        model.unload()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_texts_run_at_once_one_thread_each_longest_first(
    onnx_export_dir: Path,
    chunks_and_torch: tuple[list[str], Any],
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    """``threads`` texts in flight at once, the longest first, each vector its own bits."""
    import onnxruntime as ort

    texts, _ = chunks_and_torch
    texts = texts[:12]
    info = model_info(BUNDLED_MODEL, backend)
    model = load_embedder(info, cache_dir=onnx_export_dir, threads=2)
    assert isinstance(model, OnnxEmbedder) and model.streams == 2
    alone = np.stack([model([t])[0] for t in texts])  # one text per call: nothing at once
    session_cls: Any = OpenVinoSession if backend == "openvino" else ort.InferenceSession
    real_run = session_cls.run
    lock = threading.Lock()
    second = threading.Event()
    in_flight, most, lengths, threads, intra = [0], [0], [], set(), set()

    def run(session: Any, outputs: Any, feed: dict[str, Any], *args: Any) -> Any:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
            lengths.append(int(feed["attention_mask"].sum()))
            threads.add(threading.current_thread().name)
            if isinstance(session, ort.InferenceSession):
                intra.add(session.get_session_options().intra_op_num_threads)
            if in_flight[0] == 2:
                second.set()
        try:
            second.wait(60)  # the first run waits for a second beside it: no timing
            return real_run(session, outputs, feed, *args)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(session_cls, "run", run)
    got = model(texts)
    assert most[0] == 2
    assert len(threads) == 2 and all(t.startswith("ingestd-embed") for t in threads)
    assert intra <= {1}  # onnxruntime: one thread per run
    # the first two started (nothing ends before two are in flight) are the longest two
    assert sorted(lengths[:2]) == sorted(lengths)[-2:]
    assert np.array_equal(got, alone)  # the same bits as each text alone


def test_the_longest_texts_run_first() -> None:
    feeds = [{"input_ids": np.ones((1, n), dtype=np.int64)} for n in (5, 40, 7, 40, 300)]
    assert longest_first(feeds) == [4, 1, 3, 2, 0]
    assert longest_first([]) == []
