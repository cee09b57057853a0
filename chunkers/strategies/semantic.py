"""``semantic``: sentences grouped where adjacent sentences stop being similar.

Greg Kamradt's "semantic chunking" recipe (also LangChain's ``SemanticChunker`` and
chonkie's ``SemanticChunker``): embed every sentence
(:func:`~ingestd.chunkers.strategies.sentence.sentence_spans`), compute the cosine similarity of
each pair of adjacent sentences, and start a new chunk where it drops below a threshold:
an absolute cosine (``threshold``) or the ``percentile``-th percentile of the
document's own similarities. Each group of sentences is then packed to the budget as
the ``sentence`` strategy does (a sentence over the budget is cut by
:func:`~ingestd.chunkers.strategies.token.split_to_fit`), with ``overlap`` sentences repeated
only where the budget, not a topic change, forced the cut.

Determinism: the same text always yields the same chunks. Sentences are embedded in
document order, in batches of exactly ``batch_size`` (the last one may be shorter), so
the chunker's own calls never vary; similarities are rounded to ``decimals`` places
before any comparison, which absorbs the floating-point noise of other batchings (a
vector served by the daemon's embedding cache was maybe computed in another batch:
measured here with all-MiniLM-L6-v2, batch 1 against batch 16 moves vector components
by at most 2e-7 and changed no rounded similarity). ``batch_size: 1`` makes every
vector independent of its neighbours, at about 4x the embedding time on CPU.

The embedding callable comes from :class:`~ingestd.chunkers.base.ChunkContext`: the
chunker never loads a model.
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from ingestd.chunkers.base import Chunk, ChunkContext, Chunker, ChunkerOptions, LineIndex
from ingestd.chunkers.strategies.sentence import sentence_spans
from ingestd.chunkers.strategies.token import measure, pack, split_to_fit

__all__ = ["SemanticChunker", "SemanticOptions"]


class SemanticOptions(ChunkerOptions):
    """Options of the ``semantic`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200: fits
            all-MiniLM-L6-v2).
        threshold: absolute cosine similarity in ``[-1, 1]``; a pair of adjacent
            sentences less similar than this starts a new chunk. ``None`` (default)
            uses ``percentile`` instead.
        percentile: with no ``threshold``, the cut-off is this percentile (0–100) of
            the document's adjacent-sentence similarities (default 20: about one
            boundary per five sentences).
        overlap: sentences repeated at the start of a chunk cut by the budget (default
            0; never across a similarity boundary).
        batch_size: sentences per call of the embedding callable (default 8; DESIGN.md
            measured batches of 4-16 fastest on 2 cores).
        decimals: decimal places similarities are rounded to (default 3).
    """

    max_tokens: int = 200
    threshold: float | None = None
    percentile: float = 20.0
    overlap: int = 0
    batch_size: int = 8
    decimals: int = 3

    @model_validator(mode="after")
    def _check(self) -> SemanticOptions:
        if self.max_tokens <= 0:
            raise ValueError("max_tokens must be > 0")
        if self.threshold is not None and not -1.0 <= self.threshold <= 1.0:
            raise ValueError("threshold must be a cosine similarity in [-1, 1]")
        if not 0.0 <= self.percentile <= 100.0:
            raise ValueError("percentile must be in [0, 100]")
        if self.overlap < 0:
            raise ValueError("overlap must be >= 0")
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if not 0 <= self.decimals <= 7:
            raise ValueError("decimals must be in [0, 7]")
        return self


class SemanticChunker(Chunker):
    """Similarity-bounded sentence groups; see the module docstring.

    Offsets are ``str`` indices; ``max_tokens`` is in budget tokens; ``overlap`` is in
    sentences (a piece of a cut sentence counts as one). ``meta["boundary"]`` of a chunk
    says why it starts where it does: ``"start"`` (first chunk), ``"similarity"`` or
    ``"budget"``.

    Raises:
        ValueError: ``ctx.embed`` is ``None``, or invalid :class:`SemanticOptions`.
    """

    name = "semantic"
    version = 1
    Options = SemanticOptions
    options: SemanticOptions

    def __init__(self, options: ChunkerOptions, ctx: ChunkContext) -> None:
        if ctx.embed is None:
            raise ValueError(
                "the semantic chunker needs an embedding callable: pass "
                "ChunkContext(embed=...) (the daemon passes its cached embedder)"
            )
        super().__init__(options, ctx)

    def chunk(self, text: str) -> list[Chunk]:
        """Group the sentences of ``text`` by similarity, within ``max_tokens`` tokens."""
        sentences = sentence_spans(text)
        if not sentences:
            return []
        units: list[tuple[int, int]] = []
        first_unit: list[int] = []  # index in `units` of each sentence's first piece
        fits = measure(self.budget, text, sentences)[2]
        for (s, e), whole in zip(sentences, fits, strict=True):
            first_unit.append(len(units))
            if whole:
                units.append((s, e))
            else:
                units.extend(split_to_fit(self.budget, text, s, e))
        sims = self.similarities([text[s:e] for s, e in sentences])
        cut = self._cutoff(sims)
        breaks = [first_unit[k + 1] for k, sim in enumerate(sims) if sim < cut]
        lines = LineIndex(text)
        groups = pack(self.budget, text, units, overlap=self.options.overlap, breaks=breaks)
        hard = set(breaks)
        chunks = []
        for n, (i, j) in enumerate(groups):
            why = "start" if n == 0 else "similarity" if i in hard else "budget"
            start, end = units[i][0], units[j - 1][1]
            chunks.append(self.make_chunk(text, lines, start, end, meta={"boundary": why}))
        return chunks

    def similarities(self, sentences: list[str]) -> list[float]:
        """Rounded cosine similarity of each pair of adjacent ``sentences``.

        Sentences are embedded in order, ``batch_size`` at a time; the result has
        ``len(sentences) - 1`` items.

        Raises:
            ValueError: the embedding callable returned the wrong number of vectors.
        """
        import numpy as np

        if len(sentences) < 2:
            return []
        embed = self.ctx.embed
        assert embed is not None
        size = self.options.batch_size
        parts: list[Any] = []
        for k in range(0, len(sentences), size):
            batch = sentences[k : k + size]
            vectors = np.asarray(embed(batch), dtype=np.float64)
            if vectors.ndim != 2 or vectors.shape[0] != len(batch):
                raise ValueError(
                    f"embedding callable returned shape {vectors.shape} for {len(batch)} texts"
                )
            parts.append(vectors)
        vecs = np.concatenate(parts)
        norms = np.linalg.norm(vecs, axis=1)
        norms[norms == 0] = 1.0
        vecs = vecs / norms[:, None]
        sims = np.einsum("ij,ij->i", vecs[:-1], vecs[1:])
        return [round(float(x), self.options.decimals) for x in sims]

    def _cutoff(self, sims: list[float]) -> float:
        """The similarity below which a boundary is placed."""
        if self.options.threshold is not None:
            return self.options.threshold
        if not sims:
            return -2.0
        import numpy as np

        value = float(np.percentile(np.asarray(sims), self.options.percentile))
        return round(value, self.options.decimals)
