r"""Markup noise in markdown and reStructuredText: what the embedded text leaves out.

The structured strategies embed a *clean rendering* of each chunk (see
:mod:`~ingestd.chunkers.markup.render`): the words a reader sees, without the parts of the
markup that only a renderer reads. This module finds those parts and returns them as
*edits* ``(start, end, replacement)`` over the decoded text; it never changes code.

Markdown (CommonMark, GFM, and the Pandoc/MkDocs/Hugo extensions found in the wild):

* links ``[text](target "title")`` and ``[text][ref]`` keep their text; images
  ``![alt](src)`` keep their alt text; an attribute list right after either
  (``{width="300"}``) goes;
* character references (``&mdash;``, ``&lt;``, ``&#124;``) become the character a
  reader sees (outside code, as CommonMark 6.2 reads them);
* autolinks ``<https://...>``, HTML tags and comments, and Hugo shortcodes
  (``{{< ... >}}``, ``{{% ... %}}``) go; a tag between two letters or digits
  leaves a space;
* attribute lists at the end of a line (``{#id}``, ``{ #id .class }``, ``{: .note}``,
  ``{key=value}``) go, so do reference-link definition lines (``[ref]: target``),
  table divider rows, setext underlines and thematic breaks;
* a heading keeps its title: the ``#`` marks of an ATX heading go (``## Setup ##``
  gives ``Setup``), as a setext heading's underline and reStructuredText's section
  adornments do;
* MkDocs container markers (``!!! note "Title"``, ``??? tip``, ``=== "Tab"``) keep
  only their title, and so do the headers of PyMdown's generic blocks
  (``/// note | Title``, whose options and closing ``///`` go); blockquote markers
  (``>``) go, GitHub alerts (``> [!NOTE]``) keep their word; snippet includes
  (``--8<-- "file"``, mdBook's ``{{#include file}}``) go, and so does a code block
  that holds nothing else, or nothing at all (:mod:`~ingestd.chunkers.markup.extensions`);
* code spans, fenced and indented code are otherwise kept as they are.

reStructuredText (docutils and Sphinx):

* roles keep their text: ``:ref:`text <target>``` gives ``text``, ``:class:`~a.B```
  gives ``a.B``; hyperlink references keep theirs (```text <url>`_`` gives ``text``);
* hyperlink targets (``.. _name:``, ``.. __: url``) and comments go, with their
  indented continuation; so do the lines of section adornments and table borders, the
  first line of ``image`` and ``figure`` directives and ``:target:`` options;
* inline literals, literal blocks (after ``::``) and the bodies of code directives
  (``code-block``, ``literalinclude``, ``doctest``...) are kept as they are.

Lines that hold nothing but such markup are left out whole by the rendering.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

from ingestd.chunkers.markup.extensions import (
    block_edits,
    include_edits,
    marker_edits,
    quote_edits,
)

#: An ATX heading line (CommonMark 4.2): group 1 its opening marks, group 2 its title
#: (``None`` when empty), then an optional closing sequence. The parser
#: (:mod:`~ingestd.chunkers.markup.mdblocks`) and the rendering share it.
ATX_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")

__all__ = [
    "ATX_HEADING",
    "Edit",
    "apply_edits",
    "clean_markdown",
    "clean_rst",
    "markdown_inline",
    "markdown_line_edits",
    "rst_edits",
]

#: ``(start, end, replacement)``: ``text[start:end]`` becomes ``replacement``.
Edit = tuple[int, int, str]

_SOFT = r"\n(?![ \t]*+\n)"  # a line end that is not a blank line
# possessive quantifiers: a failed match backs out in linear time
_LINK_TEXT = rf"(?:[^\[\]\n\\]++|\\.|{_SOFT}|\[(?:[^\[\]\n]++|{_SOFT})*+\])*+"
_DEST = r"(?:<[^<>\n]*+>|(?:[^\s()\\]++|\\.|\((?:[^\s()\\]++|\\.)*+\))*+)"
_TITLE = r"""(?:"[^"]*+"|'[^']*+'|\([^()]*+\))"""
_ATTR = r"\{:?[ \t]*+(?:[#.][\w-]|[\w-]+=)[^{}\n]*+\}"  # {#id}, {.class}, {: #id}, {key=v}
_AT = {
    "[": re.compile(
        rf"\[(?P<text>{_LINK_TEXT})\]"
        rf"(?:\([ \t]*+\n?[ \t]*+{_DEST}(?:[ \t\n]++{_TITLE})?[ \t]*+\n?[ \t]*+\)"
        rf"|\[[^\[\]\n]*+\])(?:{_ATTR})?"
    ).match,
    "<": re.compile(
        r"(?P<comment><!--.*?-->)"
        r"|(?P<auto><[A-Za-z][A-Za-z0-9.+-]{1,31}:[^<>\s]*+>)"
        rf"|(?P<tag></?[A-Za-z][A-Za-z0-9-]*+(?:\s(?:[^<>\n]++|{_SOFT})*+)?/?>)",
        re.S,
    ).match,
    "{": re.compile(
        rf"(?P<short>\{{\{{[<%].*?[%>]\}}\}})|(?P<attr>{_ATTR}[ \t]*+(?=\n|\Z))", re.S
    ).match,
    # a character reference (CommonMark 6.2): named, decimal or hexadecimal
    "&": re.compile(
        r"(?P<entity>&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});)"
    ).match,
}
_REF_DEF = re.compile(  # the target may go on the next line
    r"^ {0,3}\[(?!\^)(?:[^\[\]\n\\]|\\.){1,999}\]:[ \t]*(?:\n[ \t]*)?(?:<[^<>\n]*>|\S+)"
    r"""(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$""",
    re.M,
)
_CELLS = r"[ \t]*+\|?[ \t]*+:?-++:?[ \t]*+(?:\|[ \t]*+:?-++:?[ \t]*+)"
_DIVIDER = re.compile(_CELLS + r"*+\|?[ \t]*+$", re.M)  # a table's second line
_DIVIDER_IN = re.compile(r"(?<=\n)" + _CELLS + r"++\|?[ \t]*+(?=\n|\Z)")  # one with a pipe
_RULE = re.compile(r"^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$", re.M)


def _line_end(text: str, pos: int, end: int) -> int:
    eol = text.find("\n", pos, end)
    return end if eol == -1 else eol + 1


def markdown_inline(text: str, start: int, end: int, out: list[Edit]) -> None:
    r"""Append the edits of markdown prose ``text[start:end]`` to ``out`` (sorted).

    A construct is looked for where ``[``, ``<`` or ``{`` starts one; one that is
    escaped (``\[``), or inside a code span (an odd number of backticks before it on
    its line), is kept. Link text is cleaned in turn.
    """
    found: list[int] = []
    for ch in "[<{&":  # str.find runs at memchr speed, far ahead of a regular expression
        i = text.find(ch, start, end)
        while i != -1:
            found.append(i)
            i = text.find(ch, i + 1, end)
    found.sort()
    pos = start
    for i in found:
        if i < pos or (i > 0 and text[i - 1] == "\\"):
            continue
        ch = text[i]
        m = _AT[ch](text, i, end)
        if m is None:
            continue
        if text.count("`", text.rfind("\n", start, i) + 1, i) & 1:
            continue  # inside a code span
        a, b = m.span()
        if ch == "[":
            if a > start and text[a - 1] == "!":  # an image: its alt text stays
                a -= 1
            ta, tb = m.span("text")
            out.append((a, ta, ""))
            if ta < tb:
                markdown_inline(text, ta, tb, out)
            out.append((tb, b, ""))
        else:
            _construct(text, start, m, out)
        pos = b


def _construct(text: str, start: int, m: re.Match[str], out: list[Edit]) -> None:
    """Append the edit of the construct ``m`` found by :func:`markdown_inline`, not a link."""
    a, b = m.span()
    if m.lastgroup == "tag":
        space = a > 0 and b < len(text) and text[a - 1].isalnum() and text[b].isalnum()
        out.append((a, b, " " if space else ""))
    elif m.lastgroup == "entity":  # the character a reader sees
        char = html.unescape(m.group())
        if char != m.group():
            out.append((a, b, char if char.isprintable() else " "))
    elif m.lastgroup == "attr":  # with the blanks before it
        while a > start and text[a - 1] in " \t":
            a -= 1
        out.append((a, b, ""))
    else:
        out.append((a, b, ""))


def markdown_line_edits(text: str, start: int, end: int, kind: str, out: list[Edit]) -> None:
    """Append the whole-line edits of one markdown block ``text[start:end]`` of ``kind``.

    Reference-link definitions, table divider rows, setext underlines, thematic breaks
    and include directives: each such line is left out; of an ATX heading, the ``#``
    marks (its title stays); of a container's marker line, only its title stays
    (:mod:`~ingestd.chunkers.markup.extensions`).
    """
    if kind == "heading":
        eol = text.find("\n", start, end)
        if eol != -1:  # a setext heading: its underline
            out.append((eol + 1, end, ""))
        elif (m := ATX_HEADING.fullmatch(text, start, end)) is not None:
            if not m.group(2):  # an empty heading
                out.append((start, end, ""))
                return
            a, b = m.span(2)  # the marks go, the title stays
            out.append((start, a, ""))
            if b < end:
                out.append((b, end, ""))
        else:  # a container's marker: its title stays
            marker_edits(text, start, end, out)
        return
    include_edits(text, start, end, out)
    if kind == "para" or kind == "list":
        quote_edits(text, start, end, out)
        block_edits(text, start, end, out)
    if kind == "table":
        eol = text.find("\n", start, end)
        if eol != -1 and (m := _DIVIDER.match(text, eol + 1, _line_end(text, eol + 1, end))):
            out.append((m.start(), m.end(), ""))
    if text.find("]:", start, end) != -1:  # lazily continued blocks may hold them too
        out.extend((m.start(), m.end(), "") for m in _REF_DEF.finditer(text, start, end))
    if kind == "para" or kind == "list":
        if text[start] in "-*_ " and (m := _RULE.match(text, start, end)):
            out.append((start, m.end(), ""))
        elif text.find("|", start, end) != -1:  # a table without leading pipes
            out.extend((m.start(), m.end(), "") for m in _DIVIDER_IN.finditer(text, start, end))


# -- reStructuredText -----------------------------------------------------------------

_RST_INLINE = re.compile(
    r"(?P<lit>``(?!\s)(?:[^`]|`(?!`))*?``)"
    r"|(?P<role>(?<![\w`\\]):[A-Za-z][\w.+-]*(?::[A-Za-z][\w.+-]*)*:"
    r"`(?P<body>(?:[^`\\\n]|\\.|\n(?![ \t]*\n))+)`(?![`\w]))"
    r"|(?P<ref>(?<![\w`\\])`(?P<rtext>(?:[^`\\\n]|\\.|\n(?![ \t]*\n))+)`__?(?!\w))"
    r"|(?P<itarget>(?<![\w\\])_`(?P<ttext>[^`\n]+)`)",
    re.S,
)
_EMBEDDED = re.compile(r"\s*<[^<>]*>\s*\Z")  # ``text <target>`` in a role or reference
_ADORNMENT = re.compile(r"[ \t]*([!-/:-@\[-`{-~])\1{2,}[ \t]*$")
_BORDER = re.compile(r"[ \t]*[+=|][-=+| \t:]*$")
_EXPLICIT = re.compile(r"([ \t]*)\.\.(?:[ \t]+|$)(?:(?P<dir>[\w:.+-]+)::|(?P<other>\S?))")
_CODE_DIRECTIVES = frozenset(
    "code-block sourcecode code literalinclude doctest testcode testoutput testsetup "
    "testcleanup productionlist highlight parsed-literal math raw graphviz digraph graph "
    "prompt ipython jupyter-execute".split()
)
_IMAGE_DIRECTIVES = frozenset({"image", "figure"})
_TARGET_OPTION = re.compile(r"[ \t]*:target:")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _rst_inline(text: str, start: int, end: int, out: list[Edit]) -> None:
    for m in _RST_INLINE.finditer(text, start, end):
        if m.group("lit") is not None:
            continue
        if m.group("role") is not None:
            a, b = m.span("body")
            body = m.group("body")
            e = _EMBEDDED.search(body)
            if e is not None and e.start() > 0:
                b = a + e.start()
            elif body[:1] in ("~", "!"):
                a += 1
            out.append((m.start(), a, ""))
            out.append((b, m.end(), ""))
        elif m.group("ref") is not None:
            a, b = m.span("rtext")
            e = _EMBEDDED.search(m.group("rtext"))
            if e is not None:
                b = a + e.start()
            out.append((m.start(), a, ""))
            out.append((b, m.end(), ""))
        else:
            a, b = m.span("ttext")
            out.append((m.start(), a, ""))
            out.append((b, m.end(), ""))


_PROSE, _DIRECTIVE, _DROP, _KEEP = range(4)  # kinds of reStructuredText lines


def rst_edits(text: str) -> list[Edit]:
    """The edits of a whole reStructuredText ``text``, in order.

    Literal blocks (the indented lines after a paragraph ending in ``::``) and the
    bodies of code directives are kept whole; explicit markup that renders to nothing
    (targets, comments) is left out with its indented continuation.
    """
    out: list[Edit] = []
    prose = -1  # start of the current run of lines to clean, else -1
    for kind, start, end, closes in _rst_lines(text):
        if kind == _PROSE or kind == _DIRECTIVE:
            if prose < 0:
                prose = start
            if closes:  # a paragraph ending in "::": a literal block follows
                _rst_inline(text, prose, end, out)
                prose = -1
            continue
        if prose >= 0:
            _rst_inline(text, prose, start, out)
            prose = -1
        if kind == _DROP:
            out.append((start, end, ""))
    if prose >= 0:
        _rst_inline(text, prose, len(text), out)
    return out


def _rst_lines(text: str) -> Iterator[tuple[int, int, int, bool]]:
    """``(kind, start, end, opens a literal block)`` of each non-blank line of ``text``."""
    lines = text.split("\n")
    n, size = len(lines), len(text)
    pos = 0
    literal = drop = -1  # indent of the line that opened a literal block or a drop
    for i, line in enumerate(lines):
        start, pos = pos, pos + len(line) + 1
        if not line.strip():
            continue
        end = min(pos, size)
        ind = _indent(line)
        if literal >= 0 and ind > literal:
            yield _KEEP, start, end, False
            continue
        if drop >= 0 and ind > drop:
            yield _DROP, start, end, False
            continue
        literal = drop = -1
        kind, block = _rst_line_kind(line, ind)
        if block == _KEEP:
            literal = ind
        elif block == _DROP:
            drop = ind
        closes = (
            kind == _PROSE
            and line.rstrip().endswith("::")
            and (i + 1 >= n or not lines[i + 1].strip())
        )
        if closes:
            literal = ind
        yield kind, start, end, closes


def _rst_line_kind(line: str, ind: int) -> tuple[int, int]:
    """The kind of a line outside literal text, and of the indented block it opens."""
    body = line[ind:]
    if body.startswith("..") and (m := _EXPLICIT.match(line)) is not None:
        name = m.group("dir")
        if name is None:
            if m.group("other") in ("[", "|"):  # a footnote, a substitution
                return _PROSE, -1
            return _DROP, _DROP  # a target or a comment, with its continuation
        if name.rpartition(":")[2] in _CODE_DIRECTIVES:
            return _KEEP, _KEEP
        if name in _IMAGE_DIRECTIVES:
            return _DROP, -1
        return _DIRECTIVE, -1
    if _ADORNMENT.match(line) or (body[:1] in "+=" and _BORDER.match(line)):
        return _DROP, -1
    if body.startswith(":target:") and _TARGET_OPTION.match(line):
        return _DROP, -1
    return _PROSE, -1


# -- strings ----------------------------------------------------------------------------


def apply_edits(text: str, edits: list[Edit]) -> str:
    """``text`` with sorted, non-overlapping ``edits`` applied."""
    parts: list[str] = []
    pos = 0
    for a, b, r in edits:
        if a < pos:  # overlapping (nested): the outer edit already covers it
            continue
        parts.append(text[pos:a])
        parts.append(r)
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


def clean_markdown(s: str) -> str:
    """Markdown inline text (a heading's title) as the model reads it, one line."""
    if "[" not in s and "<" not in s and "{" not in s and "&" not in s:
        return " ".join(s.split())
    out: list[Edit] = []
    markdown_inline(s, 0, len(s), out)
    out.sort()
    return " ".join(apply_edits(s, out).split())


def clean_rst(s: str) -> str:
    """Inline reStructuredText (a section title) as the model reads it, one line."""
    if "`" not in s:
        return " ".join(s.split())
    out: list[Edit] = []
    _rst_inline(s, 0, len(s), out)
    out.sort()
    return " ".join(apply_edits(s, out).split())
