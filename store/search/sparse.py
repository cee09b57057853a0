"""BM25 sparse vectors of embedded text: the tokeniser, term ids and the BM25 contract.

Each point carries a sparse vector (named :data:`SPARSE_VECTOR`) of its embedded text,
stored in a collection whose sparse vector has Qdrant's ``Modifier.IDF``: Qdrant
multiplies each query term by its inverse document frequency over the live collection,
``ln(1 + (N - df + 0.5) / (df + 0.5))`` (the BM25 IDF, as in Lucene), so an insert or a
delete never re-encodes other points. The document side holds only BM25's
term-frequency part (Robertson and Zaragoza, "The Probabilistic Relevance Framework:
BM25 and Beyond", 2009, eq. 3.15), with a FIXED average length::

    value(t, d) = tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / AVG_LEN))

``len(d)`` counts the terms :func:`terms` yields for ``d``. With a fixed ``AVG_LEN``
every point's vector depends on its own text alone; the query side is one ``1.0`` per
distinct query term. The score Qdrant computes is then BM25 (up to the average length).

The contract (:data:`K1`, :data:`B`, :data:`AVG_LEN`, :data:`TOKENIZER`, the stop words
and the term hash) is part of every rule fingerprint (:func:`contract`): changing any of
it re-writes every document's sparse vectors, and nothing else.

Tokeniser (version :data:`TOKENIZER`), made for technical documentation:

* an *identifier* is a run of word characters joined by ``.``, ``::``, ``-``, ``/`` or
  ``_``, optionally led by ``-``/``--`` (command-line flags), ``$`` (variables) or
  ``@`` (decorators, mentions): ``snake_case``, ``dotted.names``, ``--dry-run``,
  ``$HOME``, ``std::io::Result``, ``CamelCase``;
* it yields its lowercased whole (with the sigil, and without it when it has one),
  its pieces between connectors, and each piece's CamelCase words when it has several
  (``getUserName`` -> ``getusername``, ``get``, ``user``, ``name``): a query finds the
  exact identifier first and its parts too;
* terms of one character, terms over :data:`MAX_TERM_CHARS` characters and the
  :data:`STOP_WORDS` (as single words only: ``--no-cache`` keeps ``no-cache``) are
  left out;
* single words are stemmed with the Snowball English stemmer (``exporters`` ->
  ``export``); wholes of identifiers are not.

Why stop words and stemming (bench/bm25_variants.py, BM25 alone, span R@5 on md-docs /
rst-docs): identifiers alone 71.2 / 73.3; with stemming 81.2 / 73.3; with stop words
and stemming 78.8 / 76.7 (pooled the same as stemming alone), with 15% fewer non-zero
entries per vector, which is what local mode's sparse search costs.

Term ids are the first 4 bytes of the term's BLAKE2b digest (UTF-8), little-endian,
masked to 31 bits: stable across processes and Python versions, positive in every
client language. Collisions are rare (about 2 in a vocabulary of 100,000 terms) and
only merge two terms' counts.
"""

from __future__ import annotations

import functools
import hashlib
import re
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AVG_LEN",
    "B",
    "K1",
    "MAX_TERM_CHARS",
    "SPARSE_VECTOR",
    "STOP_WORDS",
    "TOKENIZER",
    "WORD_TABLE_MAX",
    "SparseVec",
    "contract",
    "document_vector",
    "query_vector",
    "term_id",
    "terms",
    "clear_word_tables",
]

#: Name of the sparse vector in a collection.
SPARSE_VECTOR = "bm25"
#: Tokeniser name and version: bump it whenever :func:`terms` changes its output.
TOKENIZER = "ingestd-identifiers/1"
#: BM25 term-frequency saturation (the common default, Lucene's and Elasticsearch's).
K1 = 1.2
#: BM25 length normalisation (the common default, Lucene's and Elasticsearch's).
B = 0.75
#: Fixed average document length, in terms of :func:`terms`: the mean measured on the
#: chunks of the default rules (md-docs 63, rst-docs 57; bench/bm25_variants.py).
AVG_LEN = 60.0
#: Longest term kept, in characters (longer ones are hashes, base64, minified code).
MAX_TERM_CHARS = 64
#: Lucene's English stop words (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the "
    "their then there these they this to was will with".split()
)

_SIGIL = r"(?:--?|\$|@)"
_IDENT = re.compile(rf"{_SIGIL}?\w+(?:(?:::|[./-])\w+)*")
_CONNECTOR = re.compile(r"(?:::|[./_-])+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SIGIL_RE = re.compile(_SIGIL)


@dataclass(frozen=True, slots=True)
class SparseVec:
    """A sparse vector: strictly increasing term ids and their float32 values."""

    indices: list[int]
    values: list[float]

    def as_dict(self) -> dict[str, Any]:
        """``{"indices": [...], "values": [...]}`` (JSON-ready)."""
        return {"indices": list(self.indices), "values": list(self.values)}


#: Words (and terms) remembered per process by :func:`_stem` and :func:`term_id`, least
#: recently used first out. A daemon reads ever new tokens (ids, numbers): at 100,000 and
#: 200,000 entries (~200 bytes each) these tables grew for thousands of edits, by tens of
#: MB; at 65,536 each they hold ~13 MB at most, like the chunkers' piece tables.
WORD_TABLE_MAX = 1 << 16


def clear_word_tables() -> None:
    """Forget the remembered stems and term ids (each table up to :data:`WORD_TABLE_MAX`).

    They are computed again on use, to the same values. ``ingestd run`` calls this after
    each sync that wrote (:mod:`ingestd.daemon.sync.memory`).
    """
    _stem.cache_clear()
    term_id.cache_clear()


@functools.lru_cache(maxsize=WORD_TABLE_MAX)
def _stem(word: str) -> str:
    """Snowball English stem of a lowercased word (pure-Python snowballstemmer)."""
    return str(_stemmer().stemWord(word))


@functools.cache
def _stemmer() -> Any:
    # the pure-Python class, never PyStemmer: one implementation, so one set of stems
    from snowballstemmer.english_stemmer import EnglishStemmer

    return EnglishStemmer()


@functools.cache
def _stemmer_version() -> str:
    from importlib.metadata import version

    return f"snowball-english:snowballstemmer-{version('snowballstemmer')}"


@functools.lru_cache(maxsize=WORD_TABLE_MAX)
def term_id(term: str) -> int:
    """Stable 31-bit id of ``term``: BLAKE2b (4-byte digest) of its UTF-8, masked."""
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


def _keep(term: str) -> bool:
    return 1 < len(term) <= MAX_TERM_CHARS


def _identifier_terms(raw: str) -> Iterator[str]:
    """Terms of one identifier match (see the module docstring), lowercased."""
    m = _SIGIL_RE.match(raw)
    rest = raw[m.end() :][:1] if m else ""
    sigil = m.group() if m and (rest.isalpha() or rest == "_") else ""
    core = raw[len(sigil) :]
    pieces = [p for p in _CONNECTOR.split(core) if p]
    words = [w for p in pieces for w in _CAMEL.split(p) if w]
    whole = core.lower()
    if sigil and _keep(sigil + whole):
        yield sigil + whole
    if len(words) == 1:
        word = words[0].lower()
        if word not in STOP_WORDS and _keep(word):
            yield _stem(word)
        return
    if _keep(whole):
        yield whole
    for p in pieces:
        split = [w for w in _CAMEL.split(p) if w]
        if len(split) > 1 and len(pieces) > 1 and _keep(p):
            yield p.lower()
        for w in split:
            w = w.lower()
            if w not in STOP_WORDS and _keep(w):
                yield _stem(w)


def terms(text: str) -> list[str]:
    """The BM25 terms of ``text``, in order, repeated as often as they occur."""
    out: list[str] = []
    for m in _IDENT.finditer(text):
        out.extend(_identifier_terms(m.group()))
    return out


def _as_sparse(weights: dict[int, float]) -> SparseVec:
    idx = sorted(weights)
    # values as float32, the precision Qdrant stores, so stored and recomputed agree
    return SparseVec(idx, array("f", [weights[i] for i in idx]).tolist())


def document_vector(text: str) -> SparseVec:
    """BM25 document-side vector of ``text``: term id -> saturated term frequency.

    Terms whose ids collide add their counts.
    """
    ts = terms(text)
    counts = Counter(term_id(t) for t in ts)
    norm = K1 * (1 - B + B * len(ts) / AVG_LEN)
    return _as_sparse({i: tf * (K1 + 1) / (tf + norm) for i, tf in counts.items()})


def query_vector(text: str) -> SparseVec:
    """Query-side vector of ``text``: ``1.0`` for each distinct term (Qdrant adds IDF)."""
    return _as_sparse(dict.fromkeys((term_id(t) for t in terms(text)), 1.0))


def contract() -> dict[str, Any]:
    """The BM25 contract, for rule fingerprints: what decides every sparse vector."""
    return {
        "vector": SPARSE_VECTOR,
        "tokenizer": TOKENIZER,
        "k1": K1,
        "b": B,
        "avg_len": AVG_LEN,
        "max_term_chars": MAX_TERM_CHARS,
        "stop_words": sorted(STOP_WORDS),
        "stem": _stemmer_version(),
        "term_id": "blake2b-4-le-31",
    }
