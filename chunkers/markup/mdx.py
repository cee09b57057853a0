r"""MDX: the ESM, JSX and expressions of an MDX page, and what a reader sees of them.

MDX (mdxjs.com, version 2 and later) is markdown with three more kinds of syntax:

* **ESM**: ``import`` and ``export`` statements at the start of a block (a line at
  column 0 after a blank line, or the first of the body), running to the first blank
  line where the JavaScript is complete (blank lines inside an unfinished statement
  belong to it, as in ``micromark-extension-mdxjs-esm``). A line that starts with the
  word but is no statement (``import the agent dynamically...``) stays prose.
* **JSX**: elements, written as tags (``<Note>``, ``</Note>``, ``<Card title="..."
  description="..." />``, ``<>``), anywhere text is: at a block's start or inside a
  paragraph, a tag's attributes over several lines. Between a block-level opening and
  closing tag, the children are markdown again.
* **expressions** in braces: ``{...}`` in text and as attribute values, JavaScript with
  its strings, template literals, comments and nested JSX.

:func:`read_mdx` decides, character by character, what a reader sees: ESM goes (an
``export const title``/``description``, or the ``title``/``description`` of an
exported ``metadata``, ``meta`` or ``frontMatter`` object, becomes the page's title or
description); a tag goes but for the values of its prose attributes (a ``<Tab
title="npm">``'s label, a ``<Card description="...">``); an expression goes but for
the contents of its string literals and the text of the JSX inside it, unless the
attribute or object key that holds them is markup (``href``, ``className``,
``style``...) or the string names a module (:mod:`~ingestd.chunkers.markup.jsx` lists
both). So a component whose content is data (``<PropertiesTable content={[{ name:
'model', type: 'LanguageModel', description: '...' }]} />``) keeps its names, types and
descriptions, and ``{/* a comment */}`` leaves nothing. Fenced code and code spans are
never read as MDX; ``\{`` and ``\<`` are text.

What goes is blanked in :attr:`MdxLayer.masked` (a copy of the text of the same length:
each character that goes is a space, line ends stay), so the markdown parser reads the
page's block structure around it, and listed in :attr:`MdxLayer.drops` for the
rendering. Input MDX cannot parse (an unclosed tag or brace) is read as markdown from
there: nothing is blanked, no text is lost. Offsets are ``str`` indices into the
decoded text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ingestd.chunkers.markup.jsx import JsxScanner, opens_tag

__all__ = ["MdxLayer", "read_mdx"]

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_BLANK_LINE = re.compile(r"\n[ \t]*(?:\n|\Z)")
_ESM_START = re.compile(
    r"(?:import[ \t]*(?:type[ \t]+)?(?:[\w$*{]|['\"])"
    r"|export[ \t]+(?:const|let|var|function|async|class|default|type|interface|enum)\b"
    r"|export[ \t]*[{*])"
)
_IMPORT_FROM = re.compile(
    r"""import[ \t]*['"]|import\b(?:(?!\n[ \t]*\n)[^;])*?\bfrom[ \t\n]*['"]"""
)
_STRING_META = re.compile(
    r"""export[ \t]+const[ \t]+(title|description)[ \t]*=[ \t]*"""
    r"""(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)'|`([^`$\\]*)`)"""
)
_OBJECT_META = re.compile(r"export[ \t]+const[ \t]+(?:metadata|meta|frontMatter|frontmatter)\b")
_KEY_META = re.compile(
    r"""\b(title|description)[ \t]*:[ \t]*"""
    r"""(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)'|`([^`$\\]*)`)"""
)


@dataclass
class MdxLayer:
    """What :func:`read_mdx` found in a page.

    Attributes:
        masked: the text with every character a reader does not see made a space
            (line ends kept): the same length and lines as the text.
        drops: ``(start, end)`` runs of characters a reader does not see, in order.
        esm: ``(start, end)`` of each ESM block.
        meta: ``title`` and ``description`` from the page's exports.
    """

    masked: str
    drops: list[tuple[int, int]] = field(default_factory=list)
    esm: list[tuple[int, int]] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def _meta(esm: str) -> dict[str, str]:
    """``title`` and ``description`` of an ESM block's exports (module docstring)."""
    out: dict[str, str] = {}
    for m in _STRING_META.finditer(esm):
        value = next(g for g in m.groups()[1:] if g is not None)
        out.setdefault(m.group(1), " ".join(_unescape(value).split()))
    for obj in _OBJECT_META.finditer(esm):
        brace = esm.find("{", obj.end())
        if brace == -1:
            continue
        for m in _KEY_META.finditer(esm, brace):
            value = next(g for g in m.groups()[1:] if g is not None)
            out.setdefault(m.group(1), " ".join(_unescape(value).split()))
    return {k: v for k, v in out.items() if v}


def _code_span_end(text: str, i: int, limit: int) -> int:
    """End of the code span opened by the backtick run at ``i``, or -1 (no closing run)."""
    j = i
    while j < limit and text[j] == "`":
        j += 1
    run = j - i
    while True:
        k = text.find("`" * run, j, limit)
        if k == -1:
            return -1
        e = k + run
        if (e >= limit or text[e] != "`") and text[k - 1] != "`":
            return e
        while e < limit and text[e] == "`":
            e += 1
        j = e


def _paragraph_end(text: str, i: int) -> int:
    """Start of the first blank line after ``i`` (or the end): where a code span ends."""
    m = _BLANK_LINE.search(text, i)
    return len(text) if m is None else m.start()


def read_mdx(text: str, body: int = 0) -> MdxLayer:
    """The MDX of ``text[body:]`` and what a reader sees of it (module docstring).

    Args:
        text: the decoded page.
        body: where its body starts (after front matter).

    Returns:
        An :class:`MdxLayer`; never raises on bad MDX (a construct that does not
        parse is read as markdown).
    """
    from ingestd.chunkers.markup.mdblocks import closing_fence

    scan = JsxScanner(text)
    drop = scan.drop
    n = len(text)
    esm: list[tuple[int, int]] = []
    meta: dict[str, str] = {}
    pos = body
    block_start = True
    while pos < n:
        eol = text.find("\n", pos)
        eol = n if eol == -1 else eol
        line = text[pos:eol]
        if not line.strip():
            block_start = True
            pos = eol + 1
            continue
        fence = _FENCE.match(line)
        if fence is not None and not (fence.group(1)[0] == "`" and "`" in line[fence.end() :]):
            close = closing_fence(text, fence.group(1), min(eol + 1, n)) if eol < n else -1
            if close == -1:
                break  # the rest of the page is code
            end = text.find("\n", close)
            pos = n if end == -1 else end + 1
            block_start = False
            continue
        if (
            block_start
            and _ESM_START.match(line)
            and (not line.startswith("import") or _IMPORT_FROM.match(text, pos, min(n, pos + 4000)))
        ):
            end = scan.construct(pos, _read_esm(scan))
            if end > pos:
                drop[pos:end] = b"\1" * (end - pos)  # ESM: its strings go too
                esm.append((pos, end))
                for k, v in _meta(text[pos:end]).items():
                    meta.setdefault(k, v)
                pos = end
                continue
        block_start = False
        pos = _inline(scan, pos, eol)
    masked, drops = _mask(text, drop, esm)
    return MdxLayer(masked, drops, esm, meta)


def _inline(scan: JsxScanner, pos: int, eol: int) -> int:
    """Scan the line ``text[pos:eol]`` for tags, expressions and code spans.

    Returns where the next line starts (after a construct that ran past ``eol``).
    """
    text, n, drop = scan.text, scan.n, scan.drop
    i = pos
    limit = -1  # end of the paragraph, found when a code span needs it
    while i < eol:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "`":
            if limit < 0:
                limit = _paragraph_end(text, i)
            end = _code_span_end(text, i, limit)
            if end == -1:
                while i < eol and text[i] == "`":
                    i += 1
                continue
            i = end
            if i > eol:
                eol = text.find("\n", i)
                eol = n if eol == -1 else eol
            continue
        if ch == "<" and text.startswith("<!--", i):
            end = text.find("-->", i + 4)
            if end == -1:
                i += 1
                continue
            drop[i : end + 3] = b"\1" * (end + 3 - i)
            i = end + 3
        elif ch == "<" and opens_tag(text, i):
            end = scan.construct(i, lambda p: scan.tag(p)[0])
            i = end if end > i else i + 1
        elif ch == "{":
            end = scan.construct(i, lambda p: scan.js(p + 1, "}", None))
            i = end if end > i else i + 1
        else:
            i += 1
            continue
        if i > eol:
            eol = text.find("\n", i)
            eol = n if eol == -1 else eol
    return eol + 1


def _read_esm(scan: JsxScanner) -> Callable[[int], int]:
    return lambda p: scan.js(p, "", None, stop_blank=True)


def _mask(
    text: str, drop: bytearray, esm: list[tuple[int, int]]
) -> tuple[str, list[tuple[int, int]]]:
    """The masked text and the runs of dropped characters.

    A dropped character is a space, but for one on each line that would be left blank
    although it held a word of markup outside ESM (``isOptional: true,`` inside a
    component's data, a ``</Note>`` line): that one is an ``x``, so the lines of one
    object, or of a component and its text, stay one block for the markdown parser
    (the rendering leaves the line out all the same).
    """
    runs: list[tuple[int, int]] = []
    pos = 0
    n = len(text)
    while True:
        a = drop.find(1, pos)
        if a == -1:
            break
        b = drop.find(0, a)
        b = n if b == -1 else b
        runs.append((a, b))
        pos = b
    if not runs:
        return text, runs
    out = list(text)
    in_esm = bytearray(n)
    for a, b in esm:
        in_esm[a:b] = b"\1" * (b - a)
    for a, b in runs:
        out[a:b] = [" " if ch != "\n" else ch for ch in text[a:b]]
    for a, b in runs:
        ls = text.rfind("\n", 0, a) + 1
        while ls < b:
            le = text.find("\n", ls)
            le = n if le == -1 else le
            if not in_esm[ls] and not "".join(out[ls:le]).strip():
                k = next((k for k in range(ls, le) if text[k].isalnum()), -1)
                if k >= 0:
                    out[k] = "x"
            ls = le + 1
    return "".join(out), runs
