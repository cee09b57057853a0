r"""AsciiDoc structure and its clean rendering: a faithful subset of the language.

No maintained Python library parses AsciiDoc into a tree with source positions (the
reference implementation is Asciidoctor, in Ruby; the Python ``asciidoc`` package is a
converter to HTML and DocBook), so this module reads the block structure itself, after
the `AsciiDoc Language
<https://docs.asciidoctor.org/asciidoc/latest/>`_ documentation:

* **section titles**: ``= Title`` (the document title, level 1) to ``====== Title``
  (level 6), an optional closing sequence allowed; never inside a delimited block;
* **delimited blocks**, from a delimiter line to the same line again: listing
  ``----``, literal ``....``, passthrough ``++++`` (kinds ``fence``: verbatim, cut
  only at line ends), comment ``////`` (left out), example ``====``, sidebar ``****``,
  quote ``____``, open ``--`` and tables ``|===`` (``,===``, ``:===``, ``!===``);
* **block attribute lines** (``[source,python]``, ``[NOTE]``, ``[[id]]``, ``[#id]``),
  **block titles** (``.Title``) and comment lines (``//``) belong to the block below;
* **paragraphs** and **lists** (``*``, ``-``, ``.``, ``1.``, ``term::``), runs of
  non-blank lines; admonition paragraphs (``NOTE: ...``);
* **attribute entries** (``:name: value``) anywhere, and the document header's
  author and revision lines.

The clean rendering (what is embedded) turns admonition labels into their words
(``NOTE:`` and ``[NOTE]`` give ``Note:``), attribute references into their values
(``{name}``, from the document's entries and the built-in character attributes),
links and cross references into their text (``link:url[text]``, ``https://...[text]``,
``<<id,text>>``, ``xref:doc.adoc[text]``), images into their alt text, ``kbd:[...]`` and
``footnote:[...]`` into their content; it leaves out attribute entries, block
attribute lines, anchors, comments, includes, page breaks and the delimiter lines of
compound blocks. Listing, literal and passthrough content is kept as it is.

Attribute references are the one part of a rendering that can make it longer than the
document: what their values add is counted as it is made
(:class:`~ingestd.chunkers.readers.expansion.OutputBudget`), and a document that would
pass :func:`~ingestd.chunkers.readers.expansion.expansion_limit` stops with an
:class:`~ingestd.chunkers.readers.expansion.ExpansionError`.
"""

from __future__ import annotations

import re

from ingestd.chunkers.markup.noise import Edit
from ingestd.chunkers.readers.expansion import OutputBudget
from ingestd.chunkers.sections import Block, Section

__all__ = ["BUILTIN_ATTRIBUTES", "asciidoc_edits", "read_asciidoc"]

_TITLE = re.compile(r"(={1,6})[ \t]+(\S.*?)(?:[ \t]+=+)?[ \t]*$")
_DELIM = re.compile(r"(-{4,}|\.{4,}|\+{4,}|/{4,}|={4,}|\*{4,}|_{4,}|--|[|,:!]={3,})[ \t]*$")
_VERBATIM = ("-", ".", "+")  # listing, literal, passthrough: content is not AsciiDoc
_ATTR_LINE = re.compile(r"\[(?:\[[^\]]*\]|[^\[\]]*)\][ \t]*$")
_ENTRY = re.compile(r":!?([\w][\w-]*)!?:(?:[ \t]+(.*?))?[ \t]*$", re.M)
_BLOCK_TITLE = re.compile(r"\.(?=[^\s.])")
_LIST = re.compile(r"[ \t]*(?:[*-]+|\.+|\d+\.|[a-zA-Z]\.)[ \t]+\S|.*?:{2,4}(?:[ \t]|$)")
_ADMONITION = re.compile(r"(NOTE|TIP|IMPORTANT|WARNING|CAUTION):[ \t]")
_ADMONITION_BLOCK = re.compile(r"\[(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\][ \t]*$")
_REF = re.compile(r"\{([\w][\w-]*)\}")
_INLINE = re.compile(
    r"(?P<macro>\b(?:link|xref|mailto|image|kbd|footnote|btn|menu|icon|pass):(?:[^\s\[]*)\[(?P<mtext>[^\]\n]*)\])"
    r"|(?P<url>\b(?:https?|ftp|irc)://[^\s\[<]+\[(?P<utext>[^\]\n]*)\])"
    r"|(?P<xref><<(?P<target>[^,>\n]+)(?:,[ \t]*(?P<xtext>[^>\n]*))?>>)"
    r"|(?P<anchor>\[\[[^\]\n]*\]\])"
)

_WHAT = "AsciiDoc attribute references"  # what expands, in an ExpansionError

#: The built-in attributes whose value is a character (AsciiDoc's "Character
#: replacement attributes"), besides those a document defines.
BUILTIN_ATTRIBUTES = {
    "empty": "", "blank": "", "sp": " ", "nbsp": "\u00a0", "zwsp": "\u200b",
    "wj": "\u2060", "apos": "'", "quot": '"', "lsquo": "\u2018", "rsquo": "\u2019",
    "ldquo": "\u201c", "rdquo": "\u201d", "deg": "\u00b0", "plus": "+", "brvbar": "\u00a6",
    "vbar": "|", "amp": "&", "lt": "<", "gt": ">", "startsb": "[", "endsb": "]",
    "caret": "^", "asterisk": "*", "tilde": "~", "backslash": "\\", "backtick": "`",
    "two-colons": "::", "two-semicolons": ";;", "cpp": "C++", "pp": "++",
}  # fmt: skip


def _line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def _title_lead(line: str) -> bool:
    """Whether ``line`` may stand above a section title (an anchor, attributes, a comment)."""
    return bool(_ATTR_LINE.match(line)) or line.startswith("//")


def _block_kind(delim: str) -> str:
    if delim[0] in _VERBATIM:
        return "fence"
    if delim[0] == "/":
        return "comment"
    return "table" if delim[1:2] == "=" and delim[0] in "|,:!" else "html"


def _orphan(
    blocks: list[Block], starts: list[int], lines: list[str], first: int, last: int
) -> None:
    """Lines ``first``..``last`` as a block of their own, when ``first`` >= 0.

    Attribute lines, a block title or comments with no block after them (a blank line or
    the end of the file follows) would otherwise be in no block, and their text in no
    chunk.
    """
    if first >= 0:
        end = starts[last] + len(lines[last])
        blocks.append(Block(starts[first], end, 0, "para", starts[first]))


def read_asciidoc(text: str, section_levels: int = 3) -> list[Section]:
    """Sections of trimmed, linked blocks of AsciiDoc ``text``, headings not yet glued.

    The first section is the text before the first section title (possibly without
    blocks). A block's ``body`` is where it starts after the attribute lines, block
    title and comments above it that belong to it.
    """
    lines = text.split("\n")
    starts = _line_starts(text)
    sections = [Section((), 0, [])]
    stack: list[tuple[int, str]] = []
    i, n = 0, len(lines)
    lead = -1  # first line of the attribute lines / block title above the next block
    while i < n:
        line = lines[i]
        if not line.strip():
            _orphan(sections[-1].blocks, starts, lines, lead, i - 1)
            i += 1
            lead = -1
            continue
        a = starts[i] if lead < 0 else starts[lead]
        body = starts[i]
        if (m := _DELIM.match(line)) is not None:
            delim = m.group(1)
            j = i + 1
            while j < n and lines[j].rstrip() != delim:
                j += 1
            j = min(j, n - 1)
            sections[-1].blocks.append(
                Block(a, starts[j] + len(lines[j]), 0, _block_kind(delim), body)
            )
            i, lead = j + 1, -1
            continue
        m = _TITLE.match(line)
        if m is not None and (lead < 0 or all(_title_lead(lines[k]) for k in range(lead, i))):
            level = len(m.group(1))
            end = starts[i] + len(line)
            block = Block(a, end, 0, "heading", body)
            i, lead = i + 1, -1
            if level > section_levels:
                sections[-1].blocks.append(block)
                continue
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, render_inline(m.group(2).strip(), {})))
            sections.append(Section(tuple(t for _, t in stack), level, [block]))
            continue
        if _ATTR_LINE.match(line) or _BLOCK_TITLE.match(line) or line.startswith("//"):
            lead = i if lead < 0 else lead
            i += 1
            continue
        j = i + 1
        while j < n and lines[j].strip() and not _DELIM.match(lines[j]):
            j += 1
        kind = "list" if _LIST.match(line) else "para"
        sections[-1].blocks.append(Block(a, starts[j - 1] + len(lines[j - 1]), 0, kind, body))
        i, lead = j, -1
    _orphan(sections[-1].blocks, starts, lines, lead, n - 1)
    flat = [b for s in sections for b in s.blocks]
    for k, blk in enumerate(flat):
        while blk.end > blk.start and text[blk.end - 1].isspace():
            blk.end -= 1
        blk.next = flat[k + 1].start if k + 1 < len(flat) else len(text)
    return sections


def render_inline(s: str, attrs: dict[str, str]) -> str:
    """``s`` with inline macros, links, cross references and attribute references rendered.

    Raises:
        ExpansionError: attribute references make it longer than its bound.
    """
    out: list[Edit] = []
    _inline_edits(s, 0, len(s), attrs, out, OutputBudget(len(s), _WHAT))
    parts, pos = [], 0
    for a, b, r in sorted(out):
        if a < pos:
            continue
        parts.append(s[pos:a] + r)
        pos = b
    parts.append(s[pos:])
    return "".join(parts)


def _value(name: str, attrs: dict[str, str], budget: OutputBudget) -> str | None:
    """The value of attribute ``name`` (counted against ``budget``), or ``None``."""
    v = attrs.get(name, BUILTIN_ATTRIBUTES.get(name))
    if v is not None:
        budget.spend(len(v))
    return v


def _refs(s: str, attrs: dict[str, str], budget: OutputBudget) -> str:
    """``s`` with the attribute references that have a value replaced by it."""

    def value(m: re.Match[str]) -> str:
        v = _value(m.group(1), attrs, budget)
        return m.group() if v is None else v

    return _REF.sub(value, s)


def _inline_edits(
    text: str, start: int, end: int, attrs: dict[str, str], out: list[Edit], budget: OutputBudget
) -> None:
    """Edits of links, macros, cross references, anchors and attribute references.

    Raises:
        ExpansionError: the attribute values used pass ``budget``.
    """
    taken: list[tuple[int, int]] = []
    for m in _INLINE.finditer(text, start, end):
        if m.group("macro"):
            out.append((m.start(), m.end(), _refs(m.group("mtext"), attrs, budget)))
        elif m.group("url"):
            shown = m.group("utext") or m.group()[: m.group().index("[")]
            out.append((m.start(), m.end(), _refs(shown, attrs, budget)))
        elif m.group("xref"):
            shown = (m.group("xtext") or m.group("target")).strip()
            out.append((m.start(), m.end(), _refs(shown, attrs, budget)))
        else:
            out.append((m.start(), m.end(), ""))
        taken.append((m.start(), m.end()))
    k = 0
    for m in _REF.finditer(text, start, end):
        while k < len(taken) and taken[k][1] <= m.start():
            k += 1
        if k < len(taken) and taken[k][0] <= m.start():
            continue  # inside a link or macro: rendered with it
        value = _value(m.group(1), attrs, budget)
        if value is not None:
            out.append((m.start(), m.end(), value))


def asciidoc_edits(text: str, sections: list[Section]) -> list[Edit]:
    """The edits of the clean rendering of AsciiDoc ``text`` (see the module docstring).

    ``sections`` are :func:`read_asciidoc`'s, not yet glued.

    Raises:
        ExpansionError: attribute references would make the rendering longer than
            :func:`~ingestd.chunkers.readers.expansion.expansion_limit` of the text's
            length allows (counted as they are resolved: stops at the bound).
    """
    budget = OutputBudget(len(text), _WHAT)
    attrs: dict[str, str] = {}
    for entry in _ENTRY.finditer(text):  # document attributes, wherever they are defined
        attrs.setdefault(entry.group(1), entry.group(2) or "")
    out: list[Edit] = []
    for sec in sections:
        for b in sec.blocks:
            _lead_edits(text, b, out)
            if b.kind == "comment":
                out.append((b.body, b.end, ""))
            elif b.kind == "heading" and (m := _TITLE.match(text, b.body, b.end)) is not None:
                out.append((b.body, m.start(2), ""))  # the title's words, without its marks
                out.append((m.end(2), b.end, ""))
                _inline_edits(text, m.start(2), m.end(2), attrs, out, budget)
            elif b.kind == "fence":
                continue
            elif b.kind in ("html", "table"):
                first_eol = text.find("\n", b.body, b.end)
                if b.kind == "html" and first_eol != -1:  # compound: its delimiters go
                    out.append((b.body, first_eol + 1, ""))
                    out.append((text.rfind("\n", b.body, b.end) + 1, b.end, ""))
                _body_edits(text, b.body, b.end, attrs, out, budget)
            else:
                _body_edits(text, b.body, b.end, attrs, out, budget)
    return out


def _lead_edits(text: str, b: Block, out: list[Edit]) -> None:
    """Attribute lines, anchors and comments above a block go; a block title keeps its words."""
    pos = b.start
    while pos < b.body:
        eol = text.find("\n", pos, b.body)
        eol = b.body if eol == -1 else eol
        line = text[pos:eol]
        if (m := _ADMONITION_BLOCK.match(line)) is not None:
            out.append((pos, eol, m.group(1).capitalize() + ":"))
        elif _BLOCK_TITLE.match(line):
            out.append((pos, pos + 1, ""))
        else:
            out.append((pos, eol, ""))
        pos = eol + 1


def _body_edits(
    text: str, start: int, end: int, attrs: dict[str, str], out: list[Edit], budget: OutputBudget
) -> None:
    """Edits of the lines of a paragraph, list or compound block."""
    pos = start
    while pos < end:
        eol = text.find("\n", pos, end)
        eol = end if eol == -1 else eol
        line = text[pos:eol]
        if (
            _ENTRY.match(line)
            or line.startswith("//")
            or line.startswith("include::")
            or line.strip() in ("<<<", "'''", "+")
            or _ATTR_LINE.match(line)
        ):
            out.append((pos, eol, ""))
        elif line.startswith("image::"):
            m = re.match(r"image::[^\[]*\[([^,\]]*)", line)
            out.append((pos, eol, m.group(1) if m else ""))
        else:
            if (m := _ADMONITION.match(line)) is not None:
                out.append((pos, pos + len(m.group(1)), m.group(1).capitalize()))
            elif _BLOCK_TITLE.match(line) and pos == start:
                out.append((pos, pos + 1, ""))
            _inline_edits(text, pos, eol, attrs, out, budget)
        pos = eol + 1
