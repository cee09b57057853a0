"""``code``: source files split at definitions (Python, via ``ast``) or at blank lines.

Python (``language: python``, the default) is parsed with the standard library's
``ast``; statement lines (``lineno``/``end_lineno``, decorators included) cut the file
into *units* that tile it line by line, so the comments and blank lines before a
statement belong to it and nothing is dropped. A unit that fits the budget is kept
whole (a function or class with its decorators and docstring); small units are packed
together. A class or function over the budget is split into its body's statements,
packed the same way, and every chunk that does not hold the definition line gets that
line (e.g. ``class Foo(Bar):``) as :attr:`~ingestd.chunkers.base.Chunk.prefix`, which is
embedded but is not part of the verbatim text. Any other statement over the budget is
cut by the line packer. Python that this interpreter's ``ast`` rejects (a syntax error,
or newer syntax such as 3.12's ``type X = ...``: 20 of the 187 files of the code corpus
under Python 3.11) is outlined from ``tokenize``'s logical lines and indentation
instead, with the same result wherever ``ast`` would have succeeded.

The line packer, used for other source files (``language: text``) and for Python that
does not even tokenize, packs blank-line-separated blocks; a block over the budget is cut at
lines and an over-long line at token boundaries
(:func:`~ingestd.chunkers.strategies.token.split_to_fit`).

Packing is local, so that editing one function leaves the other chunks (and their ids)
alone: a greedy pass restarts at every *anchor*, a unit chosen by the hash of its first
line with a probability proportional to its size (content-defined boundaries, as in
content-defined chunking), about one per ``anchor_tokens`` tokens. An edit can
therefore only re-pack the units between two anchors.
"""

from __future__ import annotations

import ast
import io
import tokenize
import zlib
from dataclasses import dataclass, field
from typing import Literal

from pydantic import model_validator

from ingestd.chunkers.base import Chunk, Chunker, ChunkerOptions, LineIndex, strip_span
from ingestd.chunkers.strategies.token import measure, pack, split_to_fit

__all__ = ["CodeChunker", "CodeOptions"]

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class CodeOptions(ChunkerOptions):
    """Options of the ``code`` strategy.

    Attributes:
        max_tokens: budget per chunk, in budget tokens (default 200: fits
            all-MiniLM-L6-v2).
        language: ``"python"`` (parse with ``ast``, fall back to the line packer on a
            syntax error) or ``"text"`` (the line packer: any other source file).
        anchor_tokens: mean distance between anchors, units that start a chunk
            whatever the budget, in budget tokens (``0``, the default: ``max_tokens``,
            measured to keep one-function edits to at most 3 new chunks; ``1``
            disables packing). Smaller values keep edits more
            local, larger ones pack small units tighter.
    """

    max_tokens: int = 200
    language: Literal["python", "text"] = "python"
    anchor_tokens: int = 0

    @model_validator(mode="after")
    def _check(self) -> CodeOptions:
        if self.max_tokens <= 0:
            raise ValueError("max_tokens must be > 0")
        if self.anchor_tokens < 0:
            raise ValueError("anchor_tokens must be >= 0")
        return self


@dataclass(slots=True)
class _Unit:
    """Consecutive whole lines ``[start, end)`` holding one or more statements."""

    start: int
    end: int
    nodes: list[_Stmt] = field(default_factory=list)
    header: bool = False

    def names(self) -> list[str]:
        return [n.name for n in self.nodes if n.name]


@dataclass(frozen=True, slots=True)
class _Piece:
    """A chunk to be: its span, heading path and embedding prefix."""

    start: int
    end: int
    heading_path: tuple[str, ...]
    prefix: str


class CodeChunker(Chunker):
    """Definition-aware chunks of source code; see the module docstring.

    Offsets are ``str`` indices; ``max_tokens`` is in budget tokens; there is no overlap.
    ``heading_path`` is the qualified name of the innermost definition that holds the
    chunk (``("Foo", "bar")`` for method ``Foo.bar``), when it is one definition; the
    enclosing scope otherwise (empty at module level).

    Raises:
        ValueError: from :class:`CodeOptions` validation.
    """

    name = "code"
    version = 1
    Options = CodeOptions
    options: CodeOptions

    def chunk(self, text: str) -> list[Chunk]:
        """Split source ``text`` into chunks of at most ``max_tokens`` tokens."""
        if not text.strip():
            return []
        lines = LineIndex(text)
        out: list[_Piece] = []
        body = self._parse(text) if self.options.language == "python" else None
        if body:
            self._statements(text, lines, body, 0, len(text), (), "", None, out)
        else:
            self._lines(text, 0, len(text), (), "", out)
        return [
            self.make_chunk(
                text, lines, p.start, p.end, heading_path=p.heading_path, prefix=p.prefix
            )
            for p in out
        ]

    @staticmethod
    def _parse(text: str) -> list[_Stmt] | None:
        """Top-level statements, or ``None`` when ``text`` is not Python.

        ``ast`` first; Python this interpreter cannot parse (a syntax error, or newer
        syntax such as 3.12's ``type X = ...``) is outlined from its tokens instead
        (:func:`_outline`).
        """
        try:
            return [_from_ast(node) for node in ast.parse(text).body]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return _outline(text)

    # -- Python -------------------------------------------------------------------

    def _statements(
        self,
        text: str,
        lines: LineIndex,
        body: list[_Stmt],
        start: int,
        end: int,
        scope: tuple[str, ...],
        prefix: str,
        header: tuple[_Unit, str] | None,
        out: list[_Piece],
    ) -> None:
        """Chunk the statements ``body`` that tile ``text[start:end]``.

        ``header`` is the unit holding the definition line(s) of the enclosing class or
        function being split, packed first, and the prefix of the chunk that holds it
        (the outer one); the other chunks get ``prefix``, which ends with that line.
        """
        units = _tile(text, lines, body, start, end)
        outer = prefix
        if header is not None:
            units.insert(0, header[0])
            outer = header[1]
        stripped = [(strip_span(text, u.start, u.end), u) for u in units]
        stripped = [(span, u) for span, u in stripped if span[0] < span[1]]
        sizes, msizes, fits = measure(self.budget, text, [span for span, _ in stripped], prefix)
        run: list[int] = []  # indices into `stripped` of fitting units not yet packed
        for k, (_, unit) in enumerate(stripped):
            if fits[k]:
                run.append(k)
                continue
            self._flush_run(text, stripped, run, sizes, msizes, scope, (prefix, outer), out)
            run = []
            self._big(text, lines, unit, scope, prefix, out)
        self._flush_run(text, stripped, run, sizes, msizes, scope, (prefix, outer), out)

    def _flush_run(
        self,
        text: str,
        stripped: list[tuple[tuple[int, int], _Unit]],
        run: list[int],
        sizes: list[int],
        msizes: list[int],
        scope: tuple[str, ...],
        prefixes: tuple[str, str],
        out: list[_Piece],
    ) -> None:
        """:meth:`_flush` the units ``run`` of ``stripped``, with their known sizes."""
        spans = [stripped[k][0] for k in run]
        kinds: list[_Unit | None] = [stripped[k][1] for k in run]
        counts = ([sizes[k] for k in run], [msizes[k] for k in run])
        self._flush(text, spans, kinds, scope, prefixes, out, counts)

    def _big(
        self,
        text: str,
        lines: LineIndex,
        unit: _Unit,
        scope: tuple[str, ...],
        prefix: str,
        out: list[_Piece],
    ) -> None:
        """Chunk a unit over the budget: split a definition by its body, else by lines."""
        node = unit.nodes[0] if len(unit.nodes) == 1 else None
        if node is not None and node.name and node.body and node.body[0].first > node.lineno:
            split_at = lines.line_start(node.body[0].first)
            sig = self._signature(text, lines, node, split_at, prefix)
            head = _Unit(unit.start, split_at, [], header=True)
            inner = (*scope, node.name)
            self._statements(
                text, lines, node.body, split_at, unit.end, inner, prefix + sig, (head, prefix), out
            )
            return
        names = unit.names()
        path = (*scope, names[0]) if len(names) == 1 else scope
        self._lines(text, unit.start, unit.end, path, prefix, out)

    def _signature(
        self, text: str, lines: LineIndex, node: _Stmt, split_at: int, prefix: str
    ) -> str:
        """The definition line(s) of ``node`` as prefix text, ending with a newline.

        The lines from ``def``/``class`` to the end of the signature; a signature that
        would take more than a quarter of the budget is cut to its first line, and
        left out (``""``) when ``prefix`` plus it would take more than half.
        """
        first = lines.line_start(node.lineno)
        sig_end = text.rfind(":", first, split_at)
        sig_end = text.find("\n", sig_end if sig_end >= 0 else first, split_at)
        sig = text[first : sig_end if sig_end >= 0 else split_at].rstrip()
        if "\n" in sig and self.budget.count(sig) > self.budget.max_tokens // 4:
            sig = sig[: sig.index("\n")].rstrip() + " ..."
        if self.budget.count(prefix + sig) > self.budget.max_tokens // 2:
            return ""
        return sig + "\n"

    def _flush(
        self,
        text: str,
        spans: list[tuple[int, int]],
        kinds: list[_Unit | None],
        scope: tuple[str, ...],
        prefixes: tuple[str, str],
        out: list[_Piece],
        counts: tuple[list[int], list[int]] | None = None,
    ) -> None:
        """Pack the fitting units collected so far and emit their chunks.

        ``prefixes`` holds the prefix of the chunks and that of a chunk holding the
        enclosing definition's header unit.
        """
        if not spans:
            return
        prefix, outer = prefixes
        sizes, msizes = counts if counts is not None else (None, None)
        if sizes is None:
            sizes = [self.budget.count(text[a:b]) for a, b in spans]
        breaks = [i for i in range(1, len(spans)) if self._anchor(text, spans[i], sizes[i])]
        groups = pack(
            self.budget, text, spans, prefix=prefix, breaks=breaks, sizes=sizes, msizes=msizes
        )
        for i, j in groups:
            group = [k for k in kinds[i:j] if k is not None]
            names = [name for k in group for name in k.names()]
            if any(k.header for k in group):
                path, pre = scope, outer
            else:
                path, pre = ((*scope, names[0]) if len(names) == 1 else scope), prefix
            out.append(_Piece(spans[i][0], spans[j - 1][1], path, pre))

    # -- lines --------------------------------------------------------------------

    def _lines(
        self,
        text: str,
        start: int,
        end: int,
        scope: tuple[str, ...],
        prefix: str,
        out: list[_Piece],
    ) -> None:
        """The line packer: blank-line blocks, cut at lines and tokens when too big."""
        spans: list[tuple[int, int]] = []
        blocks = _blocks(text, start, end)
        for (a, b), fits in zip(blocks, measure(self.budget, text, blocks, prefix)[2], strict=True):
            if fits:
                spans.append((a, b))
            else:
                spans.extend(split_to_fit(self.budget, text, a, b, prefix))
        self._flush(text, spans, [None] * len(spans), scope, (prefix, prefix), out)

    def _anchor(self, text: str, span: tuple[int, int], size: int) -> bool:
        """Whether the unit at ``span`` (``size`` tokens) starts a chunk whatever the budget.

        A content-defined choice: the hash of the unit's first line, as a fraction of
        2**32, is below ``size / anchor_tokens``, so there is about one anchor per
        ``anchor_tokens`` tokens whatever the sizes of the units.
        """
        spacing = self.options.anchor_tokens or self.options.max_tokens
        nl = text.find("\n", span[0], span[1])
        first = text[span[0] : nl if nl >= 0 else span[1]].strip()
        return zlib.crc32(first.encode("utf-8")) < (1 << 32) * min(1.0, size / spacing)


@dataclass(slots=True)
class _Stmt:
    """One statement, from ``ast`` or from :func:`_outline`.

    Attributes:
        lineno: 1-based line of the statement itself (``def``/``class`` keyword).
        first: its first line, decorators included.
        end: its last line (inclusive).
        name: the name of a function or class, else ``""``.
        body: the statements of a function's or class's body (empty for others).
    """

    lineno: int
    first: int
    end: int
    name: str = ""
    body: list[_Stmt] = field(default_factory=list)


def _from_ast(node: ast.stmt) -> _Stmt:
    """A :class:`_Stmt` of an ``ast`` statement (bodies only for definitions)."""
    end = node.end_lineno or node.lineno
    if not isinstance(node, _DEFS):
        return _Stmt(node.lineno, node.lineno, end)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return _Stmt(node.lineno, first, end, node.name, [_from_ast(n) for n in node.body])


def _outline(text: str) -> list[_Stmt] | None:
    """Statements of Python that ``ast`` rejects, from ``tokenize``'s logical lines.

    Indentation gives the nesting; a logical line starting with ``def``, ``async def``
    or ``class`` opens a definition, and the decorator lines before it join it.
    Returns ``None`` when even tokenizing fails or meets a character Python has no
    token for (then the line packer takes over).
    """
    logical: list[tuple[int, int, int, str, str]] = []  # depth, first, last, keyword, name
    depth, start = 0, 0
    words: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.INDENT:
                depth += 1
            elif tok.type == tokenize.DEDENT:
                depth -= 1
            elif tok.type == tokenize.ERRORTOKEN and not tok.string.isspace():
                return None  # not Python at all (e.g. a run of "!"): stop early
            elif tok.type == tokenize.NEWLINE:
                if words:
                    logical.append((depth, start, tok.start[0], *_keyword(words)))
                words = []
            elif tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER):
                if not words:
                    start = tok.start[0]
                if len(words) < 3:
                    words.append(tok.string)
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return _nest(logical, 0, len(logical))


def _keyword(words: list[str]) -> tuple[str, str]:
    """``(keyword, name)`` of a logical line from its first tokens."""
    if words[0] == "async" and len(words) > 2 and words[1] == "def":
        return "def", words[2]
    if words[0] in ("def", "class") and len(words) > 1:
        return words[0], words[1]
    if words[0] in ("elif", "else", "except", "finally"):
        return "+", ""  # continues the compound statement before it
    return ("@", "") if words[0] == "@" else ("", "")


def _nest(logical: list[tuple[int, int, int, str, str]], i: int, stop: int) -> list[_Stmt]:
    """Statements at ``depth`` among ``logical[i:stop]``, each owning the deeper lines."""
    out: list[_Stmt] = []
    decorated = 0  # first line of pending decorators
    while i < stop:
        d, first, last, keyword, name = logical[i]
        j = i + 1
        while j < stop and logical[j][0] > d:
            j += 1
        end = logical[j - 1][2]
        if keyword == "@":
            decorated = decorated or first
        elif keyword == "+" and out and not decorated:
            out[-1].end = end
        else:
            body = _nest(logical, i + 1, j) if keyword in ("def", "class") else []
            out.append(_Stmt(first, decorated or first, end, name, body))
            decorated = 0
        i = j
    if decorated:  # decorators with nothing after them
        out.append(_Stmt(decorated, decorated, logical[stop - 1][2]))
    return out


def _line_end(text: str, lines: LineIndex, line: int) -> int:
    """Offset just past line ``line`` (past its newline), or ``len(text)``."""
    return lines.line_start(line + 1) if line < lines.n_lines else len(text)


def _tile(text: str, lines: LineIndex, body: list[_Stmt], start: int, end: int) -> list[_Unit]:
    """Units of whole lines tiling ``text[start:end]``, one per statement (or line group).

    Each unit runs from the end of the previous one to the end of its statement's last
    line, so leading comments belong to the next statement; trailing lines after the
    last statement form a unit of their own.
    """
    units: list[_Unit] = []
    cursor = start
    for node in body:
        stop = min(end, _line_end(text, lines, node.end))
        if units and stop <= cursor:  # several statements on one line
            units[-1].nodes.append(node)
            continue
        units.append(_Unit(cursor, stop, [node]))
        cursor = stop
    if cursor < end:
        units.append(_Unit(cursor, end))
    return units


def _blocks(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Blank-line-separated blocks of ``text[start:end]``, trimmed."""
    out: list[tuple[int, int]] = []
    block = -1
    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        stop = end if nl < 0 else nl + 1
        blank = text[pos:stop].isspace() or pos == stop
        if blank and block >= 0:
            out.append(strip_span(text, block, pos))
            block = -1
        elif not blank and block < 0:
            block = pos
        pos = stop
    if block >= 0:
        out.append(strip_span(text, block, end))
    return [(a, b) for a, b in out if a < b]
