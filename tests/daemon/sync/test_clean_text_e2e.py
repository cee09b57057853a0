"""End to end, real model: the model and BM25 read the clean text; the payload stays verbatim.

A markdown and an rst page full of markup noise (link targets, image URLs, heading
attribute lists, HTML, reference definitions, hyperlink targets) are ingested by the
engine with the bundled model. What the model was given holds none of that noise; each
point's sparse vector is the BM25 vector of exactly that text; the payload ``text`` is
the verbatim slice of the file at its offsets; and a search finds the passage by its
words, never by a URL's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import SPARSE_KEY, CountingEmbedder, make_engine, store_snapshot

MD = """\
# Exporters {#exporters .wide}

<!-- maintainers: keep this list sorted -->
Send telemetry to a backend with the [OTLP exporter](https://zqxhost.example.org/otlp/v1)
or, for debugging, the [console exporter][console]. <span class="note">See also</span>
![diagram of the pipeline](https://zqxhost.example.org/img/pipeline.png)

## Configure the endpoint { #endpoint }

Set `OTEL_EXPORTER_OTLP_ENDPOINT` to the address of the collector; the default port
of the gRPC receiver is 4317.

[console]: https://zqxhost.example.org/console
"""

RST = """\
Sampling
========

The ratio sampler keeps a fixed share of traces, see `the sampling guide
<https://zqxhost.example.org/sampling>`_ for the trade-offs.

.. _zqxtarget: https://zqxhost.example.org/target

.. a comment the reader never sees

Parent-based sampling follows the decision of the caller's span.
"""


@pytest.mark.slow
def test_real_model_and_bm25_read_clean_text_payload_stays_verbatim(
    tmp_path: Path, real_embedder: CountingEmbedder
) -> None:
    from ingestd.chunkers.text import decode
    from ingestd.daemon.commands.query.search import search
    from ingestd.store.search.sparse import document_vector, term_id
    from ingestd.store.vectors.ids import chunk_hash

    root = tmp_path / "docs"
    root.mkdir()
    (root / "exporters.md").write_text(MD, encoding="utf-8")
    (root / "sampling.rst").write_text(RST, encoding="utf-8")
    state = tmp_path / "state"
    eng = make_engine(root, state, real_embedder)
    try:
        (name,) = eng.context.sources
        assert eng.sync(name).indexed == 2
    finally:
        eng.close()
    seen = real_embedder.texts
    assert seen, "nothing was embedded"
    for t in seen:
        assert "zqxhost" not in t and "http" not in t, t
        assert "{#" not in t and "{ #" not in t and "<" not in t, t
        assert "maintainers" not in t and "never sees" not in t, t
    joined = "\n".join(seen)
    for words in ("OTLP exporter", "console exporter", "See also", "sampling guide"):
        assert words in joined, words

    points = store_snapshot(state)
    by_hash = {chunk_hash(t): t for t in seen}
    files = {rel: decode((root / rel).read_bytes()) for rel in ("exporters.md", "sampling.rst")}
    url_term = term_id("zqxhost")
    for p in points.values():
        assert p["text"] == files[p["path"]][p["start_char"] : p["end_char"]]
        indices, values = p[SPARSE_KEY]
        want = document_vector(by_hash[p["chunk_hash"]])
        assert list(indices) == want.indices
        assert list(values) == pytest.approx(want.values)
        assert url_term not in indices
    assert any("https://zqxhost.example.org/otlp/v1" in p["text"] for p in points.values())

    eng = make_engine(root, state, real_embedder)
    try:
        assert search(eng, "zqxhost", k=5, mode="sparse") == []
        hits = search(eng, "which port does the gRPC receiver listen on?", k=1, mode="hybrid")
        assert hits[0]["path"] == "exporters.md" and "4317" in hits[0]["text"]
        hits = search(eng, "parent-based sampling decision", k=1, mode="dense")
        assert hits[0]["path"] == "sampling.rst"
    finally:
        eng.close()
