"""``sentence``: BlingFire sentences packed greedily to a token budget, with overlap.

Sentence boundaries come from BlingFire (``TextToSentencesWithOffsets``; its UTF-8
byte offsets are mapped to ``str`` offsets). Each sentence runs to the start of the next,
so the units tile the text and nothing is lost; chunks are trimmed of surrounding
whitespace. Consecutive chunks share up to ``overlap`` trailing sentences. A sentence
over the budget is cut at line breaks, then after sentence punctuation (BlingFire keeps
``a. b. c`` whole when no capital follows the period), then into token windows at token
boundaries (:func:`~ingestd.chunkers.strategies.token.split_to_fit`).
"""

from __future__ import annotations

import ctypes
import re

from pydantic import model_validator

from ingestd.chunkers.base import Chunk, Chunker, ChunkerOptions, LineIndex, strip_span
from ingestd.chunkers.sizing.tokenizers import MAX_RUN
from ingestd.chunkers.strategies.token import measure, pack, split_to_fit

__all__ = ["SentenceChunker", "SentenceOptions", "sentence_spans"]


class SentenceOptions(ChunkerOptions):
    """Options of the ``sentence`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200).
        overlap: sentences repeated at the start of the next chunk (default 1; ``>= 0``).
    """

    max_tokens: int = 200
    overlap: int = 1

    @model_validator(mode="after")
    def _check(self) -> SentenceOptions:
        if self.max_tokens <= 0:
            raise ValueError("max_tokens must be > 0")
        if self.overlap < 0:
            raise ValueError("overlap must be >= 0")
        return self


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentence spans of ``text`` as ``(start, end)`` character (``str``) offsets, trimmed.

    The spans are found by BlingFire and widened so that, between them, they cover every
    non-whitespace character of ``text``: each runs to the start of the next. A run of
    more than :data:`~ingestd.chunkers.sizing.tokenizers.MAX_RUN` symbols (no letter, digit or
    space) is a sentence of its own and is not given to BlingFire, which takes seconds
    on a megabyte of ``!``.
    """
    if not text.strip():
        return []
    starts: list[int] = []
    pos = 0
    for run in _SYMBOL_RUNS.finditer(text):
        starts.extend(pos + s for s in _sentence_starts(text[pos : run.start()]))
        starts.append(run.start())
        pos = run.end()
    starts.extend(pos + s for s in _sentence_starts(text[pos:]) if pos + s < len(text))
    starts = sorted(set(starts))
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    spans = []
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else len(text)
        a, b = strip_span(text, s, e)
        if a < b:
            spans.append((a, b))
    return spans


_SYMBOL_RUNS = re.compile(rf"(?<![^\w\s])[^\w\s]{{{MAX_RUN + 1},}}")


def _sentence_starts(text: str) -> list[int]:
    """Sorted ``str`` offsets where BlingFire's sentences start.

    Calls ``TextToSentencesWithOffsets`` of BlingFire's library the way its Python
    wrapper does (``blingfire.text_to_sentences_and_offsets``, microsoft/BlingFire
    ``dist-pypi/blingfire/__init__.py``), but maps UTF-8 byte offsets to ``str``
    offsets with numpy instead of a Python loop over every byte (2.7 s for 1 MB).
    """
    import blingfire
    import numpy as np

    if not text:
        return []
    data = text.encode("utf-8")
    size = len(data) * 2 + 16
    out = ctypes.create_string_buffer(size)
    begins = (ctypes.c_int32 * size)()
    ends = (ctypes.c_int32 * size)()
    n_out = blingfire.blingfire.TextToSentencesWithOffsets(
        ctypes.c_char_p(data),
        ctypes.c_int(len(data)),
        ctypes.byref(out),
        ctypes.byref(begins),
        ctypes.byref(ends),
        ctypes.c_int(size),
    )
    if n_out == -1 or n_out > size:
        return [0]
    n = out.value.count(b"\n") + 1
    byte_starts = np.frombuffer(memoryview(begins), dtype=np.int32, count=n)
    byte_starts = byte_starts[(byte_starts >= 0) & (byte_starts < len(data))]
    if len(data) != len(text):  # byte offset -> index of the character holding it
        raw = np.frombuffer(data, dtype=np.uint8)
        char_at = np.cumsum((raw & 0xC0) != 0x80) - 1
        byte_starts = char_at[byte_starts]
    return sorted({int(s) for s in byte_starts})


class SentenceChunker(Chunker):
    """Sentence packing to a token budget; see the module docstring.

    Offsets are ``str`` indices; ``max_tokens`` is in budget tokens; ``overlap`` is in
    sentences (a piece of a cut sentence counts as one). A chunk never repeats more
    than ``overlap`` units of the previous chunk, and always adds at least one new one.

    Raises:
        ValueError: from :class:`SentenceOptions` validation.
    """

    name = "sentence"
    version = 2
    Options = SentenceOptions
    options: SentenceOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Pack the sentences of ``text`` into chunks of at most ``max_tokens`` tokens."""
        units, sizes, msizes = self._units(text)
        lines = LineIndex(text)
        overlap = self.options.overlap
        groups = pack(self.budget, text, units, overlap=overlap, sizes=sizes, msizes=msizes)
        return [self.make_chunk(text, lines, units[i][0], units[j - 1][1]) for i, j in groups]

    def _units(self, text: str) -> tuple[list[tuple[int, int]], list[int], list[int]]:
        """Sentence spans, with sentences over budget cut by :func:`split_to_fit`.

        Returns the spans and, for each, its budget tokens and model word pieces.
        """
        sentences = sentence_spans(text)
        sizes, msizes, fits = measure(self.budget, text, sentences)
        units: list[tuple[int, int]] = []
        usizes: list[int] = []
        umsizes: list[int] = []
        for k, (s, e) in enumerate(sentences):
            if fits[k]:
                units.append((s, e))
                usizes.append(sizes[k])
                umsizes.append(msizes[k])
                continue
            pieces = split_to_fit(self.budget, text, s, e)
            psizes, pmsizes, _ = measure(self.budget, text, pieces)
            units.extend(pieces)
            usizes.extend(psizes)
            umsizes.extend(pmsizes)
        return units, usizes, umsizes
