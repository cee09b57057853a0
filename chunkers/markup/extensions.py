r"""Block syntax of documentation generators' markdown extensions: containers and includes.

MkDocs (Python-Markdown and PyMdown Extensions) and mdBook add block syntax that
CommonMark does not know. The ``markdown`` parser and its rendering
(:mod:`~ingestd.chunkers.markup.noise`) read it as follows:

* **containers**: admonitions ``!!! type "Title"`` (Python-Markdown's ``admonition``),
  collapsible blocks ``??? type "Title"`` and ``???+ type`` (PyMdown's ``details``)
  and content tabs ``=== "Label"`` (PyMdown's ``tabbed``). Their content is the lines
  indented by at least 4 more columns than the marker (Python-Markdown's
  ``tab_length``), parsed as markdown, not as indented code. The marker line renders to
  the words a reader sees: the title, or, without one, the admonition's type (which
  MkDocs shows as its title); ``!!! note ""`` renders to nothing.
* **generic blocks** of PyMdown's ``blocks`` extensions (``pymdownx.blocks.admonition``,
  ``.details``, ``.tab``, ``.html``, ``.caption``, ``.definition``; what current MkDocs
  Material trees such as Pydantic's write): a header ``/// name | Title``, YAML options
  indented under it, content that is not indented, and a closing ``///`` (more
  slashes for a nested block). The header renders as a container marker does: the
  title, or, without one, an admonition's type (``/// note`` gives ``note``); an
  ``html`` block's tag name and the header of any other untitled block render to
  nothing, and so do the options and the closing line.
* **mkdocstrings directives** (``::: package.module`` and the options indented under
  it) render to the name alone: the reader sees the generated API page under it.
* **blockquote markers** (``>`` at the start of a line) and the brackets of GitHub
  alerts (``> [!NOTE]``, which GitHub and Hugo render as a titled box) carry no words:
  they go, the quoted words stay.
* **snippet includes**: ``--8<-- "file"`` lines and ``--8<--`` blocks of file names
  (PyMdown's ``snippets``), and mdBook's ``{{#include file}}``,
  ``{{#rustdoc_include file}}``, ``{{#playground file}}`` and ``{{#title ...}}``. The
  included text is not in the document and the directive carries no word a reader
  sees: it renders to nothing, in prose and in code. A code block left with no content
  line renders to nothing, fence lines included; so does a fenced block that has no
  content line at all (a plugin fills it, as Textual's screenshot fences).

The patterns follow the extensions' own: ``RE`` of
``markdown/extensions/admonition.py`` (Python-Markdown 3.x), ``START`` of
``pymdownx/details.py`` and ``pymdownx/tabbed.py``, ``RE_START`` and ``RE_END`` of
``pymdownx/blocks/__init__.py``, ``RE_ALL_SNIPPETS`` of
``pymdownx/snippets.py`` (PyMdown Extensions 10.x), mkdocstrings' ``::: identifier``
block syntax, and mdBook's
``src/preprocess/links.rs`` (its link types). Offsets are ``str`` indices into the
decoded text.
"""

from __future__ import annotations

import re

__all__ = [
    "ADMONITION_TYPES",
    "CONTAINER_INDENT",
    "block_edits",
    "code_edits",
    "container_marker",
    "include_edits",
    "marker_edits",
    "quote_edits",
]

#: ``(start, end, replacement)``, as :data:`ingestd.chunkers.markup.noise.Edit` (which uses
#: this module, so it cannot be imported from there).
Edit = tuple[int, int, str]

#: Columns a container's content is indented by, past its marker (``tab_length``).
CONTAINER_INDENT = 4

_CONTAINER = re.compile(
    r"[ \t]*(?:"
    r"(?P<kind>!!!|\?\?\?\+?)[ \t]*(?:(?P<type>[\w-]+)(?:[ \t]+[\w-]+)*)?"
    r"(?:[ \t]*\"(?P<title>[^\"\n]*)\")?"
    r"|===[+!]{0,2}[ \t]+\"(?P<label>[^\"\n]*)\""
    r")[ \t]*"
)
_SNIPPET = r"-+8<-+"
_INCLUDE = re.compile(
    rf"[ \t]*(?:{_SNIPPET}(?:[ \t]+(?:\"[^\"\n]+\"|'[^'\n]+'))?"
    r"|\{\{[ \t]*#(?:include|rustdoc_include|playground|playpen|title)\b[^{}\n]*\}\})[ \t]*"
)
_AUTODOC = re.compile(r":::[ \t]+([\w.:-]+)[ \t]*(?:\n[ \t]+[^\n]*)*")  # with its options
_QUOTE = re.compile(r"[ \t]*(>(?:[ \t]?>)*[ \t]?)")  # blockquote markers, nested too
_ALERT = re.compile(r"\[!(\w+)\]")  # a GitHub alert: > [!NOTE]
_BARE_SNIPPET = re.compile(rf"[ \t]*{_SNIPPET}[ \t]*")  # opens or closes a block of files
_FENCE = re.compile(r"[ \t]*(?:`{3,}|~{3,})")
#: A generic block's header and end (``RE_START``/``RE_END`` of ``pymdownx.blocks``).
_BLOCK_START = re.compile(
    r"[ \t]*(?P<fence>/{3,})[ \t]*(?P<name>[\w-]+)[ \t]*(?:\|[ \t]*(?P<title>.*?))?[ \t]*"
)
_BLOCK_END = re.compile(r"[ \t]*/{3,}[ \t]*")
_BLOCK_OPTION = re.compile(r"(?: {4}|\t)[ \t]*[\w-]+[ \t]*:.*")  # YAML under the header

#: Admonition types of ``pymdownx.blocks.admonition`` (its default ``types``) and of
#: MkDocs Material: an untitled ``/// note`` shows its type as its title.
ADMONITION_TYPES = frozenset(
    "admonition note attention caution danger error tip hint important warning "
    "abstract summary tldr info todo success check done question help faq failure "
    "fail missing bug example quote cite seealso new settings".split()
)


def container_marker(line: str) -> re.Match[str] | None:
    """The match of a container's marker if ``line`` (one line) is one, else ``None``."""
    if line.lstrip()[:1] not in ("!", "?", "="):
        return None
    m = _CONTAINER.fullmatch(line)
    if m is None or (m.group("kind") and m.group("type") is None and m.group("title") is None):
        return None
    return m


def marker_edits(text: str, start: int, end: int, out: list[Edit]) -> bool:
    """Append the edits of the container marker line ``text[start:end]`` to ``out``.

    Everything but the title (or label, or else the admonition's type) goes. Returns
    whether the line is a marker.
    """
    m = container_marker(text[start:end])
    if m is None:
        return False
    group = next((g for g in ("title", "label", "type") if m.group(g) is not None), None)
    if group is None or not m.group(group).strip():
        out.append((start, end, ""))
        return True
    a, b = m.span(group)
    out.append((start, start + a, ""))
    out.append((start + b, end, ""))
    return True


def block_edits(text: str, start: int, end: int, out: list[Edit]) -> None:
    """Append the edits of the generic blocks' lines of prose block ``text[start:end]``.

    A header ``/// name | Title`` keeps its title (an untitled admonition its type); the
    YAML option lines indented right under a header and closing ``///`` lines go.
    """
    if text.find("///", start, end) == -1:
        return
    options = False
    for a, b in _lines(text, start, end):
        if options and _BLOCK_OPTION.fullmatch(text, a, b):
            out.append((a, b, ""))
            continue
        options = False
        if _BLOCK_END.fullmatch(text, a, b):
            out.append((a, b, ""))
            continue
        m = _BLOCK_START.fullmatch(text, a, b)
        if m is None:
            continue
        options = True
        name, title = m.group("name").lower(), m.group("title")
        if title and title.strip('"') and name != "html":
            t0, t1 = m.span("title")
            if title[0] == '"' and title[-1] == '"' and len(title) > 1:
                t0, t1 = t0 + 1, t1 - 1
            out.append((a, t0, ""))
            out.append((t1, b, ""))
        elif name in ADMONITION_TYPES and name != "admonition" and not title:
            out.append((a, m.start("name"), ""))
            out.append((m.end("name"), b, ""))
        else:
            out.append((a, b, ""))


def _lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each line of ``text[start:end]`` (``end`` before its newline)."""
    out = []
    pos = start
    while pos <= end:
        eol = text.find("\n", pos, end)
        eol = end if eol == -1 else eol
        out.append((pos, eol))
        pos = eol + 1
    return out


def _include_lines(text: str, lines: list[tuple[int, int]]) -> list[bool]:
    """Which of ``lines`` are include directives (or file names of a ``--8<--`` block)."""
    out = []
    in_block = False
    for a, b in lines:
        if _BARE_SNIPPET.fullmatch(text, a, b):
            in_block = not in_block
            out.append(True)
        else:
            out.append(in_block or _INCLUDE.fullmatch(text, a, b) is not None)
    return out


def quote_edits(text: str, start: int, end: int, out: list[Edit]) -> None:
    """Append the edits of the blockquote markers of prose block ``text[start:end]``.

    Each line's ``>`` markers (and the space after each) go, and so do the brackets of
    a GitHub alert (``> [!NOTE]`` renders to ``NOTE``, as GitHub and Hugo title it).
    """
    if text.find(">", start, end) == -1:
        return
    for a, b in _lines(text, start, end):
        m = _QUOTE.match(text, a, b)
        if m is None:
            continue
        out.append((m.start(1), m.end(), ""))
        if (alert := _ALERT.match(text, m.end(), b)) is not None:
            out.append((alert.start(), alert.start(1), ""))
            out.append((alert.end(1), alert.end(), ""))


def include_edits(text: str, start: int, end: int, out: list[Edit]) -> None:
    """Append the edits of prose block ``text[start:end]``: include lines go.

    So do the marker of an mkdocstrings directive (``::: package.module``: its name
    stays) and the options indented under it.
    """
    if text.startswith(":::", start) and (m := _AUTODOC.match(text, start, end)):
        out.append((start, m.start(1), ""))
        out.append((m.end(1), m.end(), ""))
    if text.find("8<", start, end) == -1 and text.find("{{", start, end) == -1:
        return
    lines = _lines(text, start, end)
    for (a, b), drop in zip(lines, _include_lines(text, lines), strict=True):
        if drop:
            out.append((a, b, ""))


def code_edits(text: str, start: int, end: int, fenced: bool, out: list[Edit]) -> None:
    """Append the edits of code block ``text[start:end]`` (``fenced``, or indented).

    Include lines go; a block left with no content line goes whole.
    """
    short = text.count("\n", start, end) < 2
    if not short and text.find("8<", start, end) == -1 and text.find("{{", start, end) == -1:
        return  # the common case: nothing to leave out
    lines = _lines(text, start, end)
    body = lines
    if fenced:
        closed = len(lines) > 1 and _FENCE.match(text, lines[-1][0], lines[-1][1]) is not None
        body = lines[1:-1] if closed else lines[1:]
    drops = _include_lines(text, body)
    if all(drop or not text[a:b].strip() for (a, b), drop in zip(body, drops, strict=True)):
        out.append((start, end, ""))
        return
    out.extend((a, b, "") for (a, b), drop in zip(body, drops, strict=True) if drop)
