"""The embedding cache and the model fingerprint."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ingestd.store.embedding.cache import CachedEmbedder, EmbeddingCache
from ingestd.store.embedding.embedder import model_info
from ingestd.store.vectors.ids import chunk_hash
from tests.helpers import CountingEmbedder, fake_vectors


def test_cache_round_trip_and_lru_bound(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings.db", max_entries=3)
    vecs = fake_vectors(["a", "b", "c", "d"])
    cache.put_many("m", {"a": vecs[0], "b": vecs[1], "c": vecs[2]})
    assert len(cache) == 3
    got = cache.get_many("m", ["a", "zz"])  # touch "a": "b" is now the least recently used
    assert set(got) == {"a"} and np.array_equal(got["a"], vecs[0])
    cache.put_many("m", {"d": vecs[3]})
    assert len(cache) == 3
    assert set(cache.get_many("m", ["a", "b", "c", "d"])) == {"a", "c", "d"}
    assert cache.get_many("other-model", ["a"]) == {}
    cache.close()
    reopened = EmbeddingCache(tmp_path / "embeddings.db", max_entries=3)
    assert set(reopened.get_many("m", ["a", "c", "d"])) == {"a", "c", "d"}
    reopened.close()


def test_cached_embedder_embeds_each_text_once(tmp_path: Path) -> None:
    model = CountingEmbedder(fake_vectors)
    cache = EmbeddingCache(":memory:")
    emb = CachedEmbedder(model, "fp", cache, chunk_hash)
    items = [(chunk_hash(t), t) for t in ("x", "y", "x")]
    first = emb.vectors(items)
    again = emb.vectors(items)
    assert model.texts == ["x", "y"]
    assert emb.stats.embedded == 2 and emb.stats.reused == 2
    assert all(np.array_equal(first[h], again[h]) for h in first)


def test_empty_cache_is_still_used(tmp_path: Path) -> None:
    """Regression: an empty cache is falsy (len 0) and was once skipped entirely."""
    model = CountingEmbedder(fake_vectors)
    emb = CachedEmbedder(model, "fp", EmbeddingCache(":memory:"), chunk_hash)
    emb.vectors([(chunk_hash("x"), "x")])
    emb.vectors([(chunk_hash("x"), "x")])
    assert model.texts == ["x"]


def test_model_calls_are_sized_to_about_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls grow to ``max_texts_per_call`` on a fast model and shrink on a slow one; a
    quick call of one text (an edit) leaves the size alone, so that a long document's
    next background step is not cut to two chunks by every edit between its steps."""
    from ingestd.store.embedding import cache as embedding_cache

    clock = {"now": 0.0, "per_text": 0.05}

    class FakeTime:
        @staticmethod
        def monotonic() -> float:
            return clock["now"]

    def model(texts: list[str]) -> np.ndarray:
        clock["now"] += clock["per_text"] * len(texts)  # the model's cost on the fake clock
        return fake_vectors(texts)

    monkeypatch.setattr(embedding_cache, "time", FakeTime)
    emb = CachedEmbedder(model, "fp", None, chunk_hash, max_texts_per_call=16, seconds_per_call=1)
    texts = iter(f"text {i}" for i in range(10_000))

    def call(n: int) -> int | None:
        emb.vectors([(chunk_hash(t), t) for t in (next(texts) for _ in range(n))])
        return emb.texts_per_call

    assert emb.texts_per_call == 4  # the first call is small: its speed is unknown
    assert [call(4), call(8), call(16)] == [8, 16, 16]
    assert call(1) == 16  # an edit's single text, quick: no change
    clock["per_text"] = 0.25  # a loaded machine: 16 texts take 4 s
    assert call(16) == 4
    assert call(1) == 4
    clock["per_text"] = 2.0  # one text over the target: the smallest call
    assert call(4) == 1 and call(1) == 1
    clock["per_text"] = 0.05
    assert [call(1), call(2), call(4)] == [2, 4, 8]


def test_calls_of_fixed_size_stay_full_however_long_they_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``seconds_per_call=None`` (an embedding server: its request size is its
    configuration): a call of ``max_texts_per_call`` texts that takes a minute leaves the
    next call as large, from the first call on."""
    from ingestd.store.embedding import cache as embedding_cache

    clock = {"now": 0.0}

    class FakeTime:
        @staticmethod
        def monotonic() -> float:
            return clock["now"]

    sizes: list[int] = []

    def model(texts: list[str]) -> np.ndarray:
        sizes.append(len(texts))
        clock["now"] += 60.0  # a slow server, whatever the size
        return fake_vectors(texts)

    monkeypatch.setattr(embedding_cache, "time", FakeTime)
    emb = CachedEmbedder(model, "fp", None, chunk_hash, max_texts_per_call=32)
    texts = [f"text {i}" for i in range(100)]
    emb.vectors([(chunk_hash(t), t) for t in texts])
    assert sizes == [32, 32, 32, 4] and emb.texts_per_call == 32


def test_a_part_empty_call_is_filled_with_the_texts_asked_for_next() -> None:
    """The texts left over by full calls share their call with texts of ``ahead`` (those
    neither cached nor found by the fallback); those wait in the cache, are not embedded
    again when asked for, and count as embedded once, never as reused."""
    calls: list[list[str]] = []

    def model(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return fake_vectors(texts)

    cache = EmbeddingCache(":memory:")
    emb = CachedEmbedder(model, "fp", cache, chunk_hash, max_texts_per_call=16)
    pairs = [(chunk_hash(t), t) for t in (f"chunk {i}" for i in range(40))]
    emb.vectors(pairs[:2])  # cached already: not embedded ahead again
    in_store = {pairs[10][0]: fake_vectors(["chunk 10"])[0]}  # a renamed file's point

    def fallback(hashes: list[str]) -> dict[str, np.ndarray]:
        return {h: v for h, v in in_store.items() if h in hashes}

    calls.clear()
    first = emb.vectors(pairs[5:10], fallback, ahead=pairs[:5] + pairs[10:])
    assert set(first) == {h for h, _ in pairs[5:10]}
    filled = ["chunk 5", "chunk 6", "chunk 7", "chunk 8", "chunk 9", "chunk 2", "chunk 3"]
    filled += ["chunk 4"] + [f"chunk {i}" for i in range(11, 19)]
    assert calls == [filled]  # 16 texts: 0, 1 cached, 10 in the store
    got = emb.vectors(pairs[:5] + pairs[10:19], fallback)
    assert calls == [filled]  # nothing embedded again
    assert np.array_equal(got[pairs[14][0]], fake_vectors(["chunk 14"])[0])
    assert emb.stats.embedded == 2 + 16
    assert emb.stats.reused == 3  # chunks 0, 1 (cached) and 10 (the store)
    emb.vectors(pairs[19:21], ahead=pairs[21:23])  # the last call of a sync: no more ahead
    assert calls[-1] == ["chunk 19", "chunk 20", "chunk 21", "chunk 22"]


def test_nothing_is_embedded_ahead_without_a_cache() -> None:
    model = CountingEmbedder(fake_vectors)
    emb = CachedEmbedder(model, "fp", None, chunk_hash, max_texts_per_call=16)
    pairs = [(chunk_hash(t), t) for t in ("a", "b", "c")]
    emb.vectors(pairs[:1], ahead=pairs[1:])
    assert model.texts == ["a"]


def test_model_fingerprint_comes_from_files_not_path(tmp_path: Path) -> None:
    bundled = model_info("all-MiniLM-L6-v2")
    copy = tmp_path / "copy-of-model"
    shutil.copytree(bundled.path, copy)
    assert model_info(str(copy)).fingerprint == bundled.fingerprint
    assert bundled.dim == 384 and bundled.max_seq_length == 256
    (copy / "config.json").write_text((copy / "config.json").read_text().replace("384", "385", 1))
    from ingestd.store.embedding import embedder

    embedder._INFO_CACHE.clear()
    assert model_info(str(copy)).fingerprint != bundled.fingerprint


def test_unknown_model_is_a_clear_error() -> None:
    from ingestd.store.embedding.embedder import ModelNotFoundError

    with pytest.raises(ModelNotFoundError, match="not bundled and is not a local folder"):
        model_info("no-such/model-anywhere")


@pytest.mark.slow
def test_real_model_vectors_are_unit_and_deterministic(real_model) -> None:
    a = real_model(["The collector receives telemetry.", "Zebra"])
    b = real_model(["The collector receives telemetry."])
    assert a.shape == (2, 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
    assert float(a[0] @ b[0]) > 0.999
