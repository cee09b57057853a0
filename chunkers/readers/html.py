r"""HTML pages -> the markdown text of their main content, cited by the file's lines.

The page is parsed by :func:`~ingestd.chunkers.readers.htmltree.parse_html` (the
standard library's tokenizer) and its **main content** is written out as markdown,
which the ``html`` strategy chunks as markdown:

* the main content is the page's one ``<article>`` (or ``itemprop="articleBody"``)
  inside its ``<main>`` (or ``role="main"``), else that ``<main>``, else ``<body>``;
* left out wherever they are: ``<script>``, ``<style>``, ``<noscript>``,
  ``<template>``, ``<svg>``, ``<nav>``, ``<aside>``, ``<footer>``, forms and their
  controls, a ``<header>`` without a heading, elements with the ARIA roles of
  navigation, banner, content info, search or complementary, ``hidden`` or
  ``aria-hidden`` elements, and the permalink anchors tools add to headings
  (``class="headerlink"``, ``¶``);
* headings become ATX headings (``## Title``), so they become ``heading_path``;
* ``<pre>`` becomes a fenced code block holding its text verbatim (the language from
  a ``language-*``/``highlight-*`` class); the chunker cuts code only at line ends;
* a table becomes one line per row, ``| a | b |``, its header row (``<thead>`` or the
  first row) followed by a divider, so that a chunk that continues a table repeats
  its header row; a caption comes before it;
* lists become ``-``/``1.`` items, indented two spaces per level down to
  :data:`MAX_LIST_INDENT` levels; inline ``<code>`` keeps backticks; ``<br>`` breaks
  the line; an image leaves its ``alt`` text; every other inline element its text;
* text keeps the line breaks of the file (other whitespace runs become one space), so
  a paragraph's lines follow the file's.

Citations (:class:`~ingestd.chunkers.readers.document.LineMap`): ``file_start_line``
and ``file_end_line`` are the lines of the HTML file where a chunk's text starts and
ends. Parsing stops at ``max_seconds``.

The text is counted line by line as it is written
(:class:`~ingestd.chunkers.readers.expansion.OutputBudget`): a page that would make more
than :func:`~ingestd.chunkers.readers.expansion.expansion_limit` of its size (a table
whose every row is padded to a first row of thousands of cells) stops there with an
:class:`~ingestd.chunkers.readers.expansion.ExpansionError`. Character references
are the tokenizer's: the named ones of HTML only, each a character or two, and entity
declarations in a document type (``<!ENTITY a "...">``) are never expanded.
"""

from __future__ import annotations

import re
import time

from ingestd.chunkers.readers.document import Extracted, FormatError, LineMap
from ingestd.chunkers.readers.expansion import OutputBudget
from ingestd.chunkers.readers.htmltree import Element, Text, parse_html
from ingestd.chunkers.text import decode

__all__ = ["MAX_LIST_INDENT", "HtmlReader", "main_content", "render_html"]

#: Deepest indentation of a list item, in levels of two spaces: items of lists nested
#: deeper are written at this level (their text is kept; an indentation that grew with
#: the depth would repeat on every line of a list nested hundreds deep).
MAX_LIST_INDENT = 8

_DROP = frozenset(
    "script style noscript template svg canvas iframe object embed nav aside footer form "
    "button select input textarea label dialog head title audio video map".split()
)
_DROP_ROLES = frozenset("navigation banner contentinfo search complementary menu menubar".split())
_PERMALINK = frozenset(("¶", "#", "§", "🔗", "\uf0c1"))
_INLINE = frozenset(
    "a abbr b bdi bdo cite code data dfn em font i kbd mark q s samp small span strong sub "
    "sup time tt u var del ins big wbr br img".split()
)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_LANG = re.compile(r"^(?:language|lang|highlight|sourceCode)-([\w+#.-]+)$")
_SPACES = re.compile(r"[^\S\n]+")
_BACKTICKS = re.compile(r"`+")

Span = tuple[int, int] | None
Token = tuple[str, int]  # text, the file line where it starts


def _dropped(el: Element) -> bool:
    if el.tag in _DROP or "hidden" in el.attrs or el.attrs.get("aria-hidden") == "true":
        return True
    if el.attrs.get("role") in _DROP_ROLES:
        return True
    if el.tag == "a" and ("headerlink" in el.classes or el.text().strip() in _PERMALINK):
        return True
    return el.tag == "header" and not any(e.tag in _HEADINGS for e in el.iter())


def main_content(root: Element) -> Element:
    """The element holding a page's main content (see the module docstring)."""
    elements = list(root.iter())
    body = next((e for e in elements if e.tag == "body"), root)
    main = next((e for e in elements if e.tag == "main" or e.attrs.get("role") == "main"), body)
    articles = [
        e for e in main.iter() if e.tag == "article" or e.attrs.get("itemprop") == "articleBody"
    ]
    return articles[0] if len(articles) == 1 else main


class _Writer:
    """Lines of the extracted text, each with the file lines it came from, counted."""

    def __init__(self, budget: OutputBudget | None) -> None:
        self.lines: list[str] = []
        self.spans: list[Span] = []
        self._budget = budget

    def blank(self) -> None:
        if self.lines and self.lines[-1] != "":
            self.line("", None)

    def line(self, text: str, span: Span) -> None:
        if self._budget is not None:
            self._budget.spend(len(text) + 1)
        self.lines.append(text)
        self.spans.append(span)


def _split_lines(tokens: list[Token]) -> list[tuple[str, Span]]:
    """Inline tokens -> lines (file line breaks kept, spaces collapsed, blank lines gone)."""
    out: list[tuple[str, Span]] = []
    cur: list[str] = []
    lo = hi = -1
    for data, line in tokens:
        parts = _SPACES.sub(" ", data).split("\n")
        for k, part in enumerate(parts):
            if k:
                out.append(("".join(cur), (lo, hi) if lo > 0 else None))
                cur, lo, hi = [], -1, -1
            if part.strip():
                lo = line + k if lo < 0 else lo
                hi = line + k
            cur.append(part)
    out.append(("".join(cur), (lo, hi) if lo > 0 else None))
    return [(" ".join(t.split()), s) for t, s in out if t.strip()]


def _inline(el: Element, tokens: list[Token]) -> None:
    """Append the inline tokens of ``el``'s content to ``tokens``."""
    for child in el.children:
        if isinstance(child, Text):
            tokens.append((child.data, child.line))
        else:
            _inline_element(child, tokens)


def _inline_element(el: Element, tokens: list[Token]) -> None:
    """Append the inline tokens of element ``el`` itself to ``tokens``."""
    if _dropped(el):
        return
    if el.tag == "br":
        tokens.append(("\n", el.line))
    elif el.tag == "img":
        if alt := el.attrs.get("alt", "").strip():
            tokens.append((f" {alt} ", el.line))
    elif el.tag in ("code", "kbd", "samp", "tt"):
        code = " ".join(el.text().split())
        if code:
            ticks = "`" * (max(map(len, _BACKTICKS.findall(code)), default=0) + 1)
            pad = " " if code.startswith("`") or code.endswith("`") else ""
            tokens.append((f"{ticks}{pad}{code}{pad}{ticks}", el.line))
    else:
        _inline(el, tokens)


def _one_line(el: Element) -> tuple[str, Span]:
    tokens: list[Token] = []
    _inline(el, tokens)
    lines = _split_lines(tokens)
    text = " ".join(t for t, _ in lines)
    spans = [s for _, s in lines if s is not None]
    return text, ((spans[0][0], spans[-1][1]) if spans else (el.line, el.line))


class _Renderer:
    """Writes the blocks of a main-content element as markdown lines."""

    def __init__(self, deadline: float, budget: OutputBudget | None = None) -> None:
        self.w = _Writer(budget)
        self._deadline = deadline
        self._count = 0
        self._parent: Element | None = None  # the container of the block being written

    def _check(self) -> None:
        self._count += 1
        if self._count % 512 == 0 and time.monotonic() > self._deadline:
            raise TimeoutError("rendering the page")

    def para(self, tokens: list[Token], first: str = "", rest: str = "") -> None:
        lines = _split_lines(tokens)
        tokens.clear()
        if not lines:
            return
        if not first:
            self.w.blank()
        for k, (text, span) in enumerate(lines):
            self.w.line((rest if k else first) + text, span)
        if not first:
            self.w.blank()

    def container(self, el: Element, depth: int = 0) -> None:
        tokens: list[Token] = []
        for child in el.children:
            if isinstance(child, Text):
                tokens.append((child.data, child.line))
            elif _dropped(child):
                continue
            elif child.tag in _INLINE:
                _inline_or_block(self, child, tokens, depth)
            else:
                self.para(tokens)
                self._parent = el
                self.block(child, depth)
        self.para(tokens)

    def block(self, el: Element, depth: int) -> None:
        self._check()
        tag = el.tag
        if tag in _HEADINGS:
            text, span = _one_line(el)
            if text:
                self.w.blank()
                self.w.line("#" * _HEADINGS[tag] + " " + text, span)
                self.w.blank()
        elif tag == "pre":
            self.pre(el)
        elif tag == "table":
            self.table(el)
        elif tag in ("ul", "ol", "menu"):
            self.list_block(el, depth)
        elif tag == "li":
            self.item(el, "- ", depth)
        elif tag == "hr":
            self.w.blank()
        else:
            self.w.blank()
            self.container(el, depth)
            self.w.blank()

    def pre(self, el: Element) -> None:
        lang = ""
        around = [self._parent] if self._parent is not None else []
        for node in (*around, el, *(c for c in el.children if isinstance(c, Element))):
            for cls in node.classes:
                if m := _LANG.match(cls):
                    lang = m.group(1)
        texts: list[Text] = []
        stack: list[Element | Text] = [el]
        while stack:
            cur = stack.pop()
            if isinstance(cur, Text):
                texts.append(cur)
            elif not _dropped(cur):
                stack.extend(reversed(cur.children))
        code = "".join(t.data for t in texts)
        first_line = texts[0].line if texts else el.line
        if code.startswith("\n"):  # the newline right after <pre> is not content
            code, first_line = code[1:], first_line + 1
        code = code.rstrip()
        if not code.strip():
            return
        fence = "`" * max(3, max(map(len, _BACKTICKS.findall(code)), default=0) + 1)
        self.w.blank()
        self.w.line(fence + lang, (first_line, first_line))
        for k, line in enumerate(code.split("\n")):
            self.w.line(line.rstrip(), (first_line + k, first_line + k))
        self.w.line(fence, None)
        self.w.blank()

    def table(self, el: Element) -> None:
        rows: list[tuple[list[str], Span, bool]] = []
        for e in el.iter():
            if e.tag == "caption":
                text, span = _one_line(e)
                if text:
                    self.w.blank()
                    self.w.line(text, span)
            if e.tag != "tr":
                continue
            cells = [c for c in e.children if isinstance(c, Element) and c.tag in ("td", "th")]
            if not cells:
                continue
            texts = [_one_line(c) for c in cells]
            last = max((s[1] for _, s in texts if s is not None), default=e.line)
            head = all(c.tag == "th" for c in cells)
            rows.append(([t.replace("|", "\\|") for t, _ in texts], (e.line, last), head))
        if not rows or not any(any(cells) for cells, _, _ in rows):
            return
        self.w.blank()
        width = max(len(cells) for cells, _, _ in rows)
        for k, (row, span, _) in enumerate(rows):
            row = row + [""] * (width - len(row))
            self.w.line("| " + " | ".join(row) + " |", span)
            if k == 0:
                self.w.line("|" + " --- |" * width, None)
        self.w.blank()

    def list_block(self, el: Element, depth: int) -> None:
        ordered = el.tag == "ol"
        n = int(el.attrs.get("start", "1") or 1) if el.attrs.get("start", "").isdigit() else 1
        if depth == 0:
            self.w.blank()
        for child in el.children:
            if isinstance(child, Element) and not _dropped(child):
                if child.tag == "li":
                    self.item(child, f"{n}. " if ordered else "- ", depth)
                    n += 1
                elif child.tag in ("ul", "ol"):
                    self.list_block(child, depth + 1)
        if depth == 0:
            self.w.blank()

    def item(self, el: Element, marker: str, depth: int) -> None:
        indent = "  " * min(depth, MAX_LIST_INDENT)
        first, rest = indent + marker, indent + " " * len(marker)
        tokens: list[Token] = []
        opened = False
        for child in el.children:
            if isinstance(child, Text):
                tokens.append((child.data, child.line))
            elif _dropped(child):
                continue
            elif child.tag in _INLINE:
                _inline_element(child, tokens)
            elif child.tag in ("ul", "ol"):
                opened = self._item_text(tokens, first, rest, opened)
                self.list_block(child, depth + 1)
            elif child.tag in ("p", "div", "span", "dl", "dt", "dd"):
                _inline(child, tokens)
                tokens.append(("\n", child.line))
            else:
                opened = self._item_text(tokens, first, rest, opened)
                self.block(child, depth)
        self._item_text(tokens, first, rest, opened)

    def _item_text(self, tokens: list[Token], first: str, rest: str, opened: bool) -> bool:
        if not _split_lines(tokens):
            tokens.clear()
            return opened
        self.para(tokens, rest if opened else first, rest)
        return True


def _inline_or_block(r: _Renderer, el: Element, tokens: list[Token], depth: int) -> None:
    """Inline ``el`` into ``tokens``, unless it holds blocks (a link around a table)."""
    if any(e.tag in ("pre", "table", "ul", "ol", "p", "div") or e.tag in _HEADINGS
           for e in el.iter() if e is not el):  # fmt: skip
        r.para(tokens)
        r.container(el, depth)
    else:
        _inline_element(el, tokens)


def render_html(
    root: Element, deadline: float | None = None, budget: OutputBudget | None = None
) -> Extracted:
    """The extracted markdown text of ``root``'s main content, with its :class:`LineMap`.

    Raises:
        TimeoutError: rendering went past ``deadline`` (a :func:`time.monotonic` time).
        ExpansionError: the text passed ``budget`` (it stops there).
    """
    r = _Renderer(float("inf") if deadline is None else deadline, budget)
    r.container(main_content(root))
    lines, spans = r.w.lines, r.w.spans
    while lines and lines[-1] == "":
        lines.pop()
        spans.pop()
    while lines and lines[0] == "":
        lines.pop(0)
        spans.pop(0)
    text = "\n".join(lines) + ("\n" if lines else "")
    return Extracted(text, LineMap(text, [*spans, None]) if lines else None)


class HtmlReader:
    """Reads an HTML page (see the module docstring).

    Args:
        max_seconds: most seconds parsing and rendering one page may take.
    """

    def __init__(self, max_seconds: float = 60.0) -> None:
        self.max_seconds = max_seconds

    def read(self, data: bytes) -> Extracted:
        """The extracted text of HTML ``data``.

        Raises:
            UndecodableError: binary or not UTF-8.
            FormatError: parsing and rendering took over ``max_seconds``.
            ExpansionError: the text would pass the expansion bound of ``data``'s size.
        """
        text = decode(data)
        deadline = time.monotonic() + self.max_seconds
        budget = OutputBudget(len(data), "the HTML page's text")
        try:
            return render_html(parse_html(text, deadline), deadline, budget)
        except TimeoutError as exc:
            raise FormatError(
                f"HTML page not read within {self.max_seconds:g} s ({exc}; "
                f"{len(data)} bytes); skipped: raise the rule's max_seconds to index it"
            ) from None
