"""The typed answers name the citation keys the readers give, no more and no fewer."""

from __future__ import annotations

from ingestd.chunkers.readers.document import CITATION_KEYS
from ingestd.daemon.client.types import Chunk, Citation, Hit, Lines


def test_every_answer_that_cites_carries_the_readers_citation_keys() -> None:
    assert set(Citation.__annotations__) == set(CITATION_KEYS)
    for typed in (Hit, Chunk, Lines):
        assert set(CITATION_KEYS) <= set(typed.__annotations__), typed.__name__
