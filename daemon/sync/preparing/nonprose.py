"""Text that is not prose: base64, hex dumps, minified code, long runs of one character.

Such text costs the embedding model as much as prose, or more (its chunks fill the
model's 256 word pieces; measured about 2.4 times the time per character of prose), and
no question is ever answered by it: a 2 MB base64 line makes over 10,000 chunks, about an
hour of embedding on two busy cores. Part of the file policy
(:mod:`~ingestd.daemon.sync.preparing.documents`), so a from-scratch ingest applies it too.

A chunk is *not prose* when less than :data:`MIN_WHITESPACE_SHARE` of its own text (the
model's view of it, :attr:`~ingestd.chunkers.base.Chunk.clean_text`, without the heading
prefix: with the bundled model's 256-piece budget a base64 chunk is about 200 characters,
and the four spaces of ``Manual > Section 3: retries`` lifted 118 of 123 such chunks over
the bar) is whitespace, that text is at least :data:`MIN_CHARS` characters long and mostly
ASCII (Chinese or Japanese prose has no spaces between words and is prose). Measured on
the 14,805 chunks the default rules make of the three shared corpora (md-docs, rst-docs,
mkdocs-docs): the lowest whitespace share is 3.0 % (a JSON log line in a code block);
base64, a run of one character and a 200,000-letter word have 0 %, jquery.min.js 1-5 %
(half of its chunks under 2.5 %).

Chunks that are not prose are never embedded, and only they are left out
(:func:`leave_out_nonprose`): the document keeps its prose chunks and ``status`` lists
it as partly skipped, with the count. Before, a document with more than 32 such chunks,
over a tenth of its chunks, was skipped whole: a 338-page DocBook manual printed by
Apache FOP lost its 881 prose chunks that way. A document none of whose chunks long
enough to judge is prose (a minified bundle, a base64 dump) is skipped whole
(:func:`nonprose_error`): failed, no chunks, its error in ``status``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ingestd.chunkers.base import Chunk

__all__ = [
    "MIN_ASCII_SHARE",
    "MIN_CHARS",
    "MIN_WHITESPACE_SHARE",
    "is_prose",
    "leave_out_nonprose",
    "nonprose_error",
    "partly_skipped_note",
]

#: Least share of whitespace in the embedded text of a prose chunk.
MIN_WHITESPACE_SHARE = 0.025
#: Chunks with shorter embedded text (characters) always count as prose (they cost little).
MIN_CHARS = 64
#: Least share of ASCII among the non-whitespace characters of a chunk that is not prose.
MIN_ASCII_SHARE = 0.9


def is_prose(text: str) -> bool:
    """Whether ``text`` (a chunk's own text) reads as prose (see the module docstring)."""
    n = len(text)
    if n < MIN_CHARS:
        return True
    spaces = sum(1 for ch in text if ch.isspace())
    if spaces >= MIN_WHITESPACE_SHARE * n:
        return True
    ascii_chars = sum(1 for ch in text if ch.isascii()) - spaces
    return ascii_chars < MIN_ASCII_SHARE * (n - spaces)


def nonprose_error(chunks: Sequence[Chunk]) -> str | None:
    """Why a document made of ``chunks`` is skipped whole as not prose, or ``None``.

    It is when none of its embedded chunks at least :data:`MIN_CHARS` long is prose
    (shorter ones are not judged: the tail of a minified file does not make it prose).

    Args:
        chunks: the document's chunks (parents are not embedded on their own and do
            not count).
    """
    judged = [c for c in chunks if not c.is_parent and len(c.clean_text) >= MIN_CHARS]
    if not judged or any(is_prose(c.clean_text) for c in judged):
        return None
    return (
        f"not prose: all {len(judged)} chunks have under {MIN_WHITESPACE_SHARE:.1%} "
        f"whitespace (base64, minified code or the like; from line {judged[0].start_line}); "
        "skipped"
    )


def leave_out_nonprose(chunks: Sequence[Chunk]) -> tuple[list[Chunk], int]:
    """``chunks`` without those that are not prose, and how many were left out.

    A parent (hierarchical strategy) none of whose children is kept goes too; the kept
    children's ``parent`` indexes are renumbered to the shorter list.

    Args:
        chunks: a document's chunks, in order (``parent`` indexes into this list).

    Returns:
        ``(kept, left_out)``: the kept chunks, in order; ``left_out`` counts the
        embedded chunks (not parents) that are not prose.
    """
    drop = {i for i, c in enumerate(chunks) if not c.is_parent and not is_prose(c.clean_text)}
    if not drop:
        return list(chunks), 0
    kept_parents = {c.parent for i, c in enumerate(chunks) if i not in drop and not c.is_parent}
    keep = [
        i for i, c in enumerate(chunks) if i not in drop and (not c.is_parent or i in kept_parents)
    ]
    index = {old: new for new, old in enumerate(keep)}
    out = []
    for i in keep:
        c = chunks[i]
        if c.parent is not None and c.parent != index.get(c.parent):
            c = dataclasses.replace(c, parent=index.get(c.parent))
        out.append(c)
    return out, len(drop)


def partly_skipped_note(left_out: int, total: int) -> str:
    """The note ``status`` shows for a document whose ``left_out`` of ``total`` chunks went."""
    return (
        f"{left_out} of {total} chunks not prose (under "
        f"{MIN_WHITESPACE_SHARE:.1%} whitespace: base64, minified code or the like); left out"
    )
