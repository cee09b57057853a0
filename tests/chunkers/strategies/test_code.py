"""The ``code`` strategy: definitions via ``ast``, class-line prefixes, locality, fallbacks."""

from __future__ import annotations

import ast
import hashlib
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from ingestd.chunkers import Chunk, ChunkContext, decode
from ingestd.chunkers.sizing.tokenizers import CharSizer, ModelSizer, TiktokenSizer
from ingestd.chunkers.strategies.code import CodeChunker, CodeOptions
from tests.helpers import CORPORA

DATA = Path(__file__).resolve().parents[2] / "data"
CODE = CORPORA / "code"
SAMPLE = (DATA / "code_sample.py").read_text()


def chunk(text: str, ctx: ChunkContext, **params: object) -> list[Chunk]:
    return CodeChunker(CodeOptions.model_validate(params), ctx).chunk(text)


def check(text: str, chunks: list[Chunk], max_tokens: int, ctx: ChunkContext) -> None:
    """Verbatim slices, coverage, budget (and the model), order."""
    covered = bytearray(len(text))
    last = -1
    for c in chunks:
        assert text[c.start : c.end] == c.text and c.text.strip()
        assert c.start > last
        last = c.end - 1
        covered[c.start : c.end] = b"\1" * (c.end - c.start)
        assert ctx.sizer.count(c.text) == c.n_tokens <= max_tokens
        if ctx.model_sizer is not None:
            assert ctx.model_sizer.count(c.embed_text) <= ctx.model_max_tokens
    missing = [i for i, ch in enumerate(text) if not covered[i] and not ch.isspace()]
    assert not missing, f"uncovered: {text[missing[0] : missing[0] + 40]!r}"


def ids(chunks: list[Chunk]) -> set[tuple[str, int]]:
    """Chunk ids as the store derives them: hash of the embedded text + occurrence."""
    seen: Counter[str] = Counter()
    out = set()
    for c in chunks:
        h = hashlib.sha256(c.embed_text.encode()).hexdigest()
        out.add((h, seen[h]))
        seen[h] += 1
    return out


@pytest.fixture(scope="module")
def tik(tiktoken_sizer: TiktokenSizer) -> ChunkContext:
    return ChunkContext(tiktoken_sizer)


def test_small_definitions_stay_whole_with_decorators_docstrings_and_comments(
    tik: ChunkContext,
) -> None:
    chunks = chunk(SAMPLE, tik, max_tokens=60)
    check(SAMPLE, chunks, 60, tik)
    by_path = {c.heading_path: c for c in chunks}
    square = by_path[("square",)]
    assert square.text.startswith("# A comment between definitions")
    assert "@functools.cache\ndef square" in square.text
    assert square.text.endswith("return x * x") and square.prefix == ""
    assert by_path[("fetch",)].text.startswith("async def fetch")
    assert by_path[("Shape",)].text.startswith("class Shape:")
    assert by_path[("Shape",)].text.endswith("return 0.0")


def test_big_class_is_split_by_method_with_the_class_line_as_prefix(tik: ChunkContext) -> None:
    chunks = chunk(SAMPLE, tik, max_tokens=60)
    inside = [c for c in chunks if c.heading_path[:1] == ("Registry",)]
    assert len(inside) > 2
    head = inside[0]
    assert head.text.startswith("class Registry(dict):") and head.prefix == ""
    for c in inside[1:]:
        assert c.prefix.startswith("class Registry(dict):\n")
        assert "class Registry" not in c.text
    lookup = [c for c in inside if c.heading_path == ("Registry", "lookup")]
    assert lookup and lookup[0].text.startswith("# Lookup helpers.\n    def lookup")
    total = next(c for c in inside if "def total_area" in c.text)
    assert "@property\n    def total_area" in total.text
    assert "class Entry:" in inside[-1].text


def test_method_over_budget_gets_class_and_def_lines_as_prefix(tik: ChunkContext) -> None:
    chunks = chunk(SAMPLE, tik, max_tokens=40)
    body = [c for c in chunks if c.heading_path == ("Registry", "lookup") and "try:" in c.text]
    assert body
    assert body[0].prefix == "class Registry(dict):\n    def lookup(self, name: str) -> Shape:\n"


def test_module_fits_in_few_chunks_at_the_default_budget(tik: ChunkContext) -> None:
    chunks = chunk(SAMPLE, tik)
    check(SAMPLE, chunks, 200, tik)
    assert len(chunks) <= 6
    assert chunks[-1].text.endswith("# trailing comment")


def test_one_definition_per_chunk_with_anchor_tokens_one(tik: ChunkContext) -> None:
    chunks = chunk(SAMPLE, tik, anchor_tokens=1)
    outside = [c for c in chunks if c.heading_path[:1] != ("Registry",)]
    tops = ast.parse(SAMPLE).body
    assert len(outside) == len(tops) - 1 + 1  # Registry is split; + the trailing comment


def test_syntax_error_falls_back_to_the_line_packer(tik: ChunkContext) -> None:
    text = (DATA / "code_invalid_py.txt").read_text()
    chunks = chunk(text, tik, max_tokens=8)
    assert [c.text for c in chunks] == ["def broken(:\n    return 1", "def fine():\n    return 2"]
    assert chunks == chunk(text, tik, max_tokens=8, language="text")


def test_line_packer_packs_blank_line_blocks(tik: ChunkContext) -> None:
    text = (DATA / "code_sample.js").read_text()
    assert [c.text for c in chunk(text, tik, max_tokens=20, language="text")] == [
        "// A small script for the line packer.\nconst limit = 10;",
        "function square(x) {\n  return x * x;\n}",
        "function cube(x) {\n  return x * x * x;\n}",
        "export { square, cube, limit };",
    ]


def test_line_packer_splits_big_blocks_at_lines_and_long_lines_at_tokens(
    tik: ChunkContext,
) -> None:
    text = "a = 1\nb = 2\nc = 3\n" + "x" * 300 + "\n"
    chunks = chunk(text, tik, max_tokens=10, language="text", anchor_tokens=100_000)
    check(text, chunks, 10, tik)
    assert [c.text for c in chunks[:2]] == ["a = 1\nb = 2", "c = 3"]
    assert "".join(c.text for c in chunks[2:]) == "x" * 300


def test_exact_small_cases() -> None:
    chars = ChunkContext(CharSizer())
    assert chunk("", chars) == [] and chunk(" \n\n\t", chars) == []
    assert [c.text for c in chunk("123\n123", chars, max_tokens=4)] == ["123", "123"]
    assert [c.text for c in chunk("éé", chars, max_tokens=1)] == ["é", "é"]
    assert [c.heading_path for c in chunk("def f():\n    pass\n", chars)] == [("f",)]


@pytest.mark.parametrize(
    "params", [{"max_tokens": 0}, {"anchor_tokens": -1}, {"language": "rust"}, {"x": 1}]
)
def test_invalid_options_are_rejected(params: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        CodeOptions.model_validate(params)


def test_real_files_fit_budget_and_model(ctx: ChunkContext) -> None:
    files = sorted(CODE.rglob("*.py"))[::12]
    assert len(files) >= 15
    for path in files:
        text = path.read_text()
        check(text, chunk(text, ctx), 200, ctx)


def test_one_function_edit_keeps_most_chunk_ids(
    tiktoken_sizer: TiktokenSizer, model_sizer: ModelSizer
) -> None:
    """Locality: editing one function of a 164 KB module re-chunks at most 3 chunks."""
    ctx = ChunkContext(tiktoken_sizer, model_sizer, 254)
    text = (CODE / "sphinx/domains/cpp/_ast.py").read_text()
    before = ids(chunk(text, ctx))
    functions = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)]
    lines = text.split("\n")
    for fn in functions[:: len(functions) // 6][:6]:
        last = fn.body[-1]
        edited = [
            *lines[: last.end_lineno],
            " " * last.col_offset + "extra = compute(alpha, beta)  # an edit",
            *lines[last.end_lineno :],
        ]
        after = ids(chunk("\n".join(edited), ctx))
        assert len(before & after) >= 0.8 * len(before), fn.name
        assert len(after - before) <= 3, fn.name


def test_newer_syntax_is_outlined_from_tokens(tik: ChunkContext) -> None:
    text = (DATA / "code_py312_syntax.txt").read_text()
    chunks = chunk(text, tik, max_tokens=40, anchor_tokens=1)
    check(text, chunks, 40, tik)
    paths = [c.heading_path for c in chunks]
    assert ("Box", "__init__") in paths and ("Box", "doubled") in paths and ("first",) in paths
    doubled = next(c for c in chunks if c.heading_path == ("Box", "doubled"))
    assert doubled.text.startswith("@property") and doubled.prefix == "class Box[T]:\n"


@pytest.mark.parametrize(
    "source",
    [SAMPLE, (CODE / "sphinx/ext/napoleon/docstring.py").read_text()],
    ids=["sample", "napoleon-docstring"],
)
def test_outline_chunks_like_ast(
    source: str, tik: ChunkContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = chunk(source, tik)

    def reject(*args: object, **kwargs: object) -> None:
        raise SyntaxError("pretend this is newer Python")

    monkeypatch.setattr(ast, "parse", reject)
    assert chunk(source, tik) == expected


def test_crlf_file_chunks_like_its_lf_twin(ctx: ChunkContext) -> None:
    lf = (CODE / "sphinx/util/nodes.py").read_bytes()
    chunks = chunk(decode(lf), ctx)
    assert chunk(decode(lf.replace(b"\n", b"\r\n")), ctx) == chunks
    assert chunk(decode(b"\xef\xbb\xbf" + lf), ctx) == chunks


def test_huge_signature_is_left_out_of_the_prefix(ctx: ChunkContext) -> None:
    params = ", ".join(f"argument_number_{i}: int = {i}" for i in range(400))
    body = "\n".join(f"        value_{i} = compute({i})" for i in range(200))
    text = f"class Big:\n    def method(self, {params}) -> None:\n{body}\n"
    chunks = chunk(text, ctx)
    check(text, chunks, 200, ctx)
    assert all(len(c.prefix) < 400 for c in chunks)
