"""Every answer shape declares the citation keys of its text, no more and no fewer.

The one definition is :data:`~ingestd.store.search.citation.CITE_KEYS` (a format's own
coordinates and a versioned source's version and commit): the typed answers of the
Python API and the MCP tools' output models declare what it names, so none of them
drops a key on the way.
"""

from __future__ import annotations

from typing import Any

import pytest

from ingestd.chunkers.readers.document import CITATION_KEYS
from ingestd.daemon.client.types import (
    Chunk,
    Citation,
    Hit,
    Lines,
    Passage,
    ReadResult,
    Versioned,
)
from ingestd.daemon.mcpserver import models
from ingestd.store.search.citation import CITE_KEYS, VERSION_KEYS


def test_every_answer_that_cites_carries_the_readers_citation_keys() -> None:
    assert set(Citation.__annotations__) == set(CITATION_KEYS)
    for typed in (Hit, Chunk, Lines):
        assert set(CITATION_KEYS) <= set(typed.__annotations__), typed.__name__


def test_hits_passages_and_chunks_declare_every_citation_key_in_both_apis() -> None:
    assert set(Citation.__annotations__) | set(Versioned.__annotations__) == set(CITE_KEYS)
    assert set(models.Cited.model_fields) == set(CITE_KEYS)
    for typed in (Hit, Passage, Chunk):
        assert set(CITE_KEYS) <= set(typed.__annotations__), typed.__name__
    for model in (models.HitOut, models.PassageOut, models.ChunkOut):
        assert set(CITE_KEYS) <= set(model.model_fields), model.__name__
    # the lines read carry the format's citation; the answer, the version and commit
    assert set(CITATION_KEYS) <= set(models.FileLines.model_fields)
    assert set(VERSION_KEYS) <= set(models.ReadOut.model_fields)
    assert set(VERSION_KEYS) <= set(ReadResult.__annotations__)


@pytest.mark.parametrize(
    "cited",
    [
        {"page": 10, "end_page": 11, "version": "v2", "commit": "c" * 40},
        {"cell": 3, "end_cell": 4, "cell_start_line": 2, "cell_end_line": 9},
        {"file_start_line": 120, "file_end_line": 135},
    ],
)
def test_the_mcp_models_keep_every_citation_key_they_are_given(cited: dict[str, Any]) -> None:
    base = {"source": "s", "path": "p", "start_line": 1, "end_line": 2, "text": "t"}
    hit = {**base, "rank": 1, "id": "i", "score": 1.0, "heading_path": [], **cited}
    passage = {**hit, "start_char": 0, "end_char": 1, "ids": ["i"], "n_tokens": 1}
    passage["truncated"] = False
    for model, data in ((models.HitOut, hit), (models.PassageOut, passage)):
        dumped = model.model_validate(data).model_dump(exclude_none=True)
        assert {k: dumped[k] for k in cited} == cited, model.__name__


def test_a_passage_declares_every_key_the_search_gives_it_in_both_apis() -> None:
    from ingestd.store.search.passages import Passage as Span

    given = Span.of_hit(
        {"id": "x", "score": 1.0, "source": "s", "path": "a.md", "start_char": 0,
         "end_char": 4, "start_line": 1, "end_line": 1, "text": "text"},
        1,
    ).as_dict()  # fmt: skip
    keys = set(given) - set(CITE_KEYS)  # a citation key only when the format has it
    assert keys <= set(Passage.__annotations__)
    assert keys <= set(models.PassageOut.model_fields)


def test_answer_pages_lists_each_page_once_with_its_spans_in_rank_order() -> None:
    from ingestd.daemon.client.types import Answer

    rows = [("a.md", 1, 1), ("a.md", 2, 1), ("b.md", 3, 2), ("c.md", 4, 3)]
    passages = [{"path": p, "rank": r, "page_rank": n} for p, r, n in rows]
    got = Answer({"hits": [], "passages": passages}).pages()
    assert [[p["rank"] for p in page] for page in got] == [[1, 2], [3], [4]]
    assert Answer({"hits": [{"id": "h"}], "passages": None}).pages() == []
