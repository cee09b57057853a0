"""Properties every registered strategy must keep (hypothesis plus exact small cases).

For each name in :data:`ingestd.chunkers.registry.CHUNKERS`: verbatim slices of the
decoded text; coverage of every non-whitespace character (outside markdown front
matter); the budget (no searched chunk over ``max_tokens`` for budgets >= 8, counted
with the same sizer, and within the model's word pieces when a model sizer is set); no
U+FFFD; overlap within the configured bounds; strictly increasing starts; determinism;
a CRLF file chunks like its LF twin; the inputs that break common splitters, among
them a 1,000,000-character run of one punctuation mark in bounded time; and, for the
strategies that read headings, no chunk is only headings unless nothing follows it
within the budget (the document's last chunk, or a next chunk it does not fit with).
``semantic`` gets the deterministic bag-of-words fake embedder.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ingestd.chunkers import CHUNKERS, Chunk, ChunkContext, Chunker, LineIndex, decode
from ingestd.chunkers.sizing.tokenizers import CharSizer, ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.sentence import sentence_spans
from tests.chunkers.conftest import bag_of_words
from tests.chunkers.test_shape import only_headings
from tests.helpers import linear_time

NAMES = sorted(CHUNKERS)
CHARS = ChunkContext(CharSizer(), embed=bag_of_words)
_FRONT_MATTER = re.compile(r"---[^\S\n]*\n.*?\n(?:---|\.\.\.)[^\S\n]*(?:\n|\Z)", re.S)

#: Known failures of strategies owned elsewhere: (name, test) -> reason. They run as
#: non-strict xfails so that a fix shows up as XPASS.
KNOWN: dict[tuple[str, str], str] = {}


def names(test: str) -> list[Any]:
    """The strategy names, with known failures of ``test`` marked xfail."""
    out: list[Any] = []
    for name in NAMES:
        reason = KNOWN.get((name, test))
        marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def params_for(name: str, max_tokens: int) -> dict[str, Any]:
    """Options that exercise overlap where a strategy has it."""
    params: dict[str, Any] = {"max_tokens": max_tokens}
    if name == "token":
        params["overlap"] = max_tokens // 4
    elif "overlap" in CHUNKERS[name].Options.model_fields:
        params["overlap"] = 1
    return params


def make(name: str, ctx: ChunkContext, **params: Any) -> Chunker:
    cls = CHUNKERS[name]
    return cls(cls.Options.model_validate(params), ctx)


def body_start(name: str, text: str) -> int:
    """Where the body starts: after YAML front matter for the markdown family.

    Front matter is what the markdown strategy's own parser says it is.
    """
    if name in (
        "markdown",
        "mdx",
        "hierarchical",
        "notebook",
    ):  # a notebook's first cell may hold it
        try:
            from ingestd.chunkers.strategies.markdown import parse_front_matter
        except ImportError:  # pragma: no cover - the parser moved: fall back to a regex
            m = _FRONT_MATTER.match(text)
            return m.end() if m else 0
        return int(parse_front_matter(text)[0])
    return 0


def check(
    name: str,
    text: str,
    chunks: list[Chunk],
    params: dict[str, Any],
    ctx: ChunkContext,
) -> None:
    """Every property of one chunking that does not need a second run."""
    max_tokens = params["max_tokens"]
    lines = LineIndex(text)
    covered = bytearray(len(text))
    for c in chunks:
        assert text[c.start : c.end] == c.text, "not a verbatim slice"
        assert (c.start_line, c.end_line) == lines.span(c.start, c.end)
        if "\ufffd" not in text:
            assert "\ufffd" not in c.embed_text
        if c.parent is not None:
            parent = chunks[c.parent]
            assert parent.is_parent and parent.start <= c.start and c.end <= parent.end
        if c.is_parent:
            continue
        covered[c.start : c.end] = b"\1" * (c.end - c.start)
        if max_tokens >= 8:
            assert ctx.sizer.count(c.clean_text) <= max_tokens, "over the budget"
        if ctx.model_sizer is not None:
            assert ctx.model_sizer.count(c.embed_text) <= ctx.model_max_tokens
    leaves = [c for c in chunks if not c.is_parent]
    for kind in (leaves, [c for c in chunks if c.is_parent]):
        starts = [c.start for c in kind]
        assert starts == sorted(set(starts)), "starts do not strictly increase"
    start = body_start(name, text)
    missing = [i for i in range(start, len(text)) if not covered[i] and not text[i].isspace()]
    assert not missing, f"uncovered: {text[missing[0] : missing[0] + 30]!r}"
    check_overlap(name, text, leaves, params)


def check_overlap(name: str, text: str, chunks: list[Chunk], params: dict[str, Any]) -> None:
    """Overlap within bounds: tokens for ``token``, sentences where an option allows it."""
    overlap = params.get("overlap", 0)
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        if name == "token":
            s, e, nxt_s = prev.meta["start_token"], prev.meta["end_token"], nxt.meta["start_token"]
            assert 0 <= e - nxt_s <= overlap
            size = params["max_tokens"]
            # exactly `overlap` tokens shared (in proportion after a shortened window)...
            expected = max(s + 1, e - overlap * (e - s) // size)
            assert nxt_s >= expected
            if nxt_s > expected:  # ...unless the windows between were blank and dropped
                assert not text[prev.end : nxt.start].strip()
        elif overlap:
            shared_text = text[nxt.start : prev.end] if nxt.start < prev.end else ""
            assert len(sentence_spans(shared_text)) <= overlap
            assert nxt.end > prev.end, "a chunk adds nothing new"
        else:
            assert nxt.start >= prev.end, "chunks overlap without an overlap option"


# -- generated inputs -------------------------------------------------------------

_PIECES = [
    "# Title",
    "## Sub heading",
    "Setext title",
    "============",
    "```python",
    "```",
    "~~~",
    "# a comment inside a fence?",
    "- item one",
    "| a | b |",
    "|---|---|",
    "    indented code",
    "Plain sentence here. Another one follows!",
    "lowercase text with no capitals. more of it",
    "def f(x):",
    "    return x",
    "class A:",
    ".. code-block:: python",
    "---",
    "title: front",
    "",
    "",
    "é日本語😀 multibyte.",
    "<|endoftext|>",
]

structured = st.lists(st.sampled_from(_PIECES), max_size=40).map("\n".join)
any_text = st.text(
    st.one_of(st.sampled_from(list("ab .!?#`~-=*:\n\n\t")), st.characters(codec="utf-8")),
    max_size=300,
)
texts = st.one_of(structured, any_text)
FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", names("chars"))
@FAST
@given(text=texts, size=st.integers(8, 120))
def test_properties_with_a_char_budget(name: str, text: str, size: int) -> None:
    params = params_for(name, size)
    check(name, text, make(name, CHARS, **params).chunk(text), params, CHARS)


@pytest.mark.parametrize("name", names("real"))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, size=st.sampled_from([8, 32, 200]))
def test_properties_with_tiktoken_and_the_model(
    name: str, text: str, size: int, ctx: ChunkContext
) -> None:
    params = params_for(name, size)
    check(name, text, make(name, ctx, **params).chunk(text), params, ctx)


@pytest.mark.parametrize("name", names("model-budget"))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, size=st.sampled_from([8, 64]))
def test_properties_with_budgets_in_model_word_pieces(
    name: str, text: str, size: int, model_sizer: ModelSizer
) -> None:
    """``tokenizer: model``: the budget itself counts the embedding model's word pieces."""
    ctx = ChunkContext(model_sizer, model_sizer, 254, embed=bag_of_words)
    params = params_for(name, size)
    check(name, text, make(name, ctx, **params).chunk(text), params, ctx)


@pytest.mark.parametrize("name", names("determinism"))
@FAST
@given(text=texts)
def test_deterministic_and_crlf_like_lf(name: str, text: str) -> None:
    text = text.replace("\x00", "")
    lf = decode(text.encode())
    crlf = decode(lf.replace("\n", "\r\n").encode())
    params = params_for(name, 40)
    first = make(name, CHARS, **params).chunk(lf)
    assert make(name, CHARS, **params).chunk(lf) == first
    assert make(name, CHARS, **params).chunk(crlf) == first


# -- headings open what follows them --------------------------------------------------

#: The strategies that read headings from the text, and how a chunk of nothing but
#: headings looks in each: markdown's ATX and setext headings (``html`` and ``notebook``
#: chunk their extracted text as markdown), reStructuredText titles with their
#: adornments, AsciiDoc's ``=`` titles. (``pdf`` takes its headings from the reader.)
HEADED = ("markdown", "mdx", "hierarchical", "html", "notebook", "rst", "asciidoc")
_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1{2,}[ \t]*")
_ADOC_TITLE = re.compile(r"={1,6}[ \t]+\S.*")


def _only_titles(name: str, text: str) -> bool:
    """Whether the verbatim ``text`` of a chunk of strategy ``name`` is only headings."""
    lines = [line.rstrip() for line in text.split("\n") if line.strip()]
    if not lines:
        return False
    if name == "rst":  # each line is an adornment or next to one
        adorned = [_ADORNMENT.fullmatch(line) is not None for line in lines]
        return all(
            a or (k > 0 and adorned[k - 1]) or (k + 1 < len(lines) and adorned[k + 1])
            for k, a in enumerate(adorned)
        )
    if name == "asciidoc":
        return all(_ADOC_TITLE.fullmatch(line) for line in lines)
    return only_headings(text)


_HEADED_PIECES = [
    "# Title", "## Sub heading", "### Deeper", "Setext title", "============", "Underline",
    "---------", "Words in a paragraph here.", "More words. And more.", "- item", "",
    "", "```", "code line", "Rst title", "*********", "= Adoc title", "== Adoc section",
    "<Note>", "</Note>", "{/* comment */}", "import X from 'x'",
]  # fmt: skip
headed = st.lists(st.sampled_from(_HEADED_PIECES), max_size=40).map("\n".join)


@pytest.mark.parametrize("name", [n for n in names("headings") if n.values[0] in HEADED])
@FAST
@given(text=headed, size=st.integers(8, 80))
@example(text="# Title\n# Title", size=12)  # hierarchical 16: a parent of one heading
@example(text="# Title\n\n## Sub heading\n\nWords in a paragraph here.", size=40)
@example(text="<Note>\n---------\n# Title", size=16)  # an HTML block, not a setext heading
def test_no_chunk_is_only_headings_unless_nothing_follows_within_the_budget(
    name: str, text: str, size: int
) -> None:
    """A chunk of nothing but headings joins the chunk after it when the two fit."""
    params = params_for(name, size)
    leaves = [c for c in make(name, CHARS, **params).chunk(text) if not c.is_parent]
    for c, nxt in zip(leaves, leaves[1:], strict=False):
        whole_lines = text[c.start - 1 : c.start] in ("", "\n") and text[c.end : c.end + 1] in (
            "",
            "\n",
        )  # not a window of a title too long for the budget
        if whole_lines and _only_titles(name, c.text):
            joined = c.clean_text + "\n\n" + nxt.clean_text
            assert CHARS.sizer.count(joined) > size, (c.text, nxt.text)


# -- exact small cases ------------------------------------------------------------

EXACT = [
    ("", 4, []),
    ("   \n\n\t ", 4, []),
    ("123\n123", 4, ["123", "123"]),
    ("éé", 1, ["é", "é"]),
    ("Hello.", 200, ["Hello."]),
]


@pytest.mark.parametrize("name", names("exact"))
@pytest.mark.parametrize(("text", "size", "expected"), EXACT, ids=[repr(t) for t, *_ in EXACT])
def test_exact_small_cases(name: str, text: str, size: int, expected: list[str]) -> None:
    params = {"max_tokens": size}
    if name == "token":
        params["overlap"] = 0
        expected = ["123\n", "123"] if text == "123\n123" else expected  # windows keep "\n"
    got = [c.text for c in make(name, CHARS, **params).chunk(text) if not c.is_parent]
    assert got == expected


@pytest.mark.parametrize("name", names("multibyte"))
def test_multibyte_text_with_tiktoken(name: str, tiktoken_sizer: TiktokenSizer) -> None:
    ctx = ChunkContext(tiktoken_sizer, embed=bag_of_words)
    text = "Ünïcödé wörds. 日本語の文です。 Emoji 😀😀😀 here. " * 40
    params = params_for(name, 8)
    check(name, text, make(name, ctx, **params).chunk(text), params, ctx)


# -- inputs that break common splitters ---------------------------------------------

HOSTILE = {
    "hash-in-fence": "# Real\n\n```bash\n# not a heading\nls -la\n```\n\n# Next\nBody text.\n",
    "lowercase": "this is all lowercase. no capitals anywhere. " * 300,
    "long-line": "x" * 200_000,
    "endoftext": "Before <|endoftext|> after. <|endoftext|>",
    "empty": "",
    "blank": " \n\n \t\n",
    "one-sentence": "Just one sentence.",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.parametrize("name", names("hostile"))
def test_inputs_that_break_splitters(name: str, case: str, ctx: ChunkContext) -> None:
    text = HOSTILE[case]
    params = params_for(name, 200)
    chunks = make(name, ctx, **params).chunk(text)
    check(name, text, chunks, params, ctx)
    assert bool(chunks) == bool(text.strip())
    if case == "hash-in-fence":
        fence = text.index("# not a heading")
        holder = [c for c in chunks if c.start <= fence < c.end and not c.is_parent]
        assert all("not a heading" not in " ".join(c.heading_path) for c in chunks)
        assert holder


@pytest.mark.parametrize("name", names("million"))
def test_million_punctuation_run_in_bounded_time(
    name: str, tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer
) -> None:
    ctx = ChunkContext(tiktoken_sizer, model_sizer, 254, embed=bag_of_words)
    text = "!" * 1_000_000
    params = params_for(name, 200)
    chunker = make(name, ctx, **params)
    chunks = linear_time(lambda n: chunker.chunk("!" * n), 100_000, 1_000_000)
    leaves = [c for c in chunks if not c.is_parent]
    assert leaves[0].start == 0 and leaves[-1].end == len(text)
    assert all(c.n_tokens <= 200 and model_sizer.count(c.embed_text) <= 254 for c in leaves)
    for prev, nxt in zip(leaves, leaves[1:], strict=False):
        assert nxt.start <= prev.end  # no gap in a text without whitespace


@pytest.mark.parametrize("name", names("million"))
def test_whitespace_heavy_lines_in_bounded_time(
    name: str, tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer
) -> None:
    # tab-indented lines: sentence units leave ~2,000 uncounted tabs between them, so a
    # greedy estimate ran to the end of the text and was measured whole for every chunk
    ctx = ChunkContext(tiktoken_sizer, model_sizer, 254, embed=bag_of_words)
    chunker = make(name, ctx, **params_for(name, 200))
    line = "\t" * 2047 + "x\n"
    chunks = linear_time(lambda n: chunker.chunk(line * (n // len(line))), 50_000, 500_000)
    leaves = [c for c in chunks if not c.is_parent]
    assert sum(c.text.count("x") for c in leaves) >= 500_000 // len(line)
    assert all(c.n_tokens <= 200 and model_sizer.count(c.embed_text) <= 254 for c in leaves)
