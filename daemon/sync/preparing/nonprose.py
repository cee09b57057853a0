"""Text that is not prose: base64, hex dumps, minified code, long runs of one character.

Such text costs the embedding model as much as prose, or more (its chunks fill the
model's 256 word pieces; measured about 2.4 times the time per character of prose), and
no question is ever answered by it: a 2 MB base64 line makes over 10,000 chunks, about an
hour of embedding on two busy cores. Part of the file policy
(:mod:`~ingestd.daemon.sync.preparing.documents`), so a from-scratch ingest applies it too.

A chunk is *not prose* when less than :data:`MIN_WHITESPACE_SHARE` of its embedded text
is whitespace, its embedded text is at least :data:`MIN_CHARS` characters long and mostly
ASCII (Chinese or Japanese prose has no spaces between words and is prose). Measured on
the 14,805 chunks the default rules make of the three shared corpora (md-docs, rst-docs,
mkdocs-docs): the lowest whitespace share is 3.0 % (a JSON log line in a code block);
base64, a run of one character and a 200,000-letter word have 0 %, jquery.min.js 1-5 %
(half of its chunks under 2.5 %).

A document is skipped (failed, no chunks, its error in ``status``) when more than
``files.max_nonprose_chunks`` of its chunks and more than :data:`MAX_NONPROSE_SHARE` of
them are not prose; otherwise it is indexed whole: a page of prose with a small inline
blob costs at most that many extra chunks.
"""

from __future__ import annotations

from collections.abc import Sequence

from ingestd.chunkers.base import Chunk

__all__ = [
    "MAX_NONPROSE_SHARE",
    "MIN_ASCII_SHARE",
    "MIN_CHARS",
    "MIN_WHITESPACE_SHARE",
    "is_prose",
    "nonprose_error",
]

#: Least share of whitespace in the embedded text of a prose chunk.
MIN_WHITESPACE_SHARE = 0.025
#: Chunks with shorter embedded text (characters) always count as prose (they cost little).
MIN_CHARS = 64
#: Least share of ASCII among the non-whitespace characters of a chunk that is not prose.
MIN_ASCII_SHARE = 0.9
#: A document is skipped only when more than this share of its chunks are not prose.
MAX_NONPROSE_SHARE = 0.1


def is_prose(text: str) -> bool:
    """Whether ``text`` (a chunk's embedded text) reads as prose (see the module docstring)."""
    n = len(text)
    if n < MIN_CHARS:
        return True
    spaces = sum(1 for ch in text if ch.isspace())
    if spaces >= MIN_WHITESPACE_SHARE * n:
        return True
    ascii_chars = sum(1 for ch in text if ch.isascii()) - spaces
    return ascii_chars < MIN_ASCII_SHARE * (n - spaces)


def nonprose_error(chunks: Sequence[Chunk], max_chunks: int) -> str | None:
    """Why a document made of ``chunks`` is skipped as not prose, or ``None``.

    Args:
        chunks: the document's chunks (parents are not embedded on their own and do
            not count).
        max_chunks: ``files.max_nonprose_chunks``: chunks that are not prose a
            document may hold.
    """
    embedded = [c for c in chunks if not c.is_parent]
    bad = [c for c in embedded if not is_prose(c.embed_text)]
    if len(bad) <= max_chunks or len(bad) <= MAX_NONPROSE_SHARE * len(embedded):
        return None
    return (
        f"not prose: {len(bad)} of {len(embedded)} chunks have under "
        f"{MIN_WHITESPACE_SHARE:.1%} whitespace (base64, minified code or the like; first at "
        f"line {bad[0].start_line}); skipped (files.max_nonprose_chunks {max_chunks})"
    )
