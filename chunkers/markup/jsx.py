r"""JavaScript and JSX inside MDX: where a construct ends, and which of its strings a reader sees.

:class:`JsxScanner` reads the JavaScript of an MDX page (ESM statements, ``{...}``
expressions) and its JSX tags and elements far enough to know where each ends: strings
(with escapes), template literals (with ``${}``), comments, brackets, and JSX inside
JavaScript after ``(``, ``=``, ``,``, ``?``, ``&&``, ``=>``, ``return``... It is not a
JavaScript parser: it checks nothing else, and a regular expression literal holding a
quote or a bracket makes it give up (:class:`NotMdx`: the caller reads that text as
markdown).

What a reader of the built page sees, and so what :mod:`~ingestd.chunkers.markup.mdx`
keeps of a construct: the values of a tag's prose attributes (:data:`PROSE_PROPS`), the
contents of the string literals and template literals of an expression unless the
attribute or object key that holds them is markup (:data:`MARKUP_KEYS`, ``on*``
handlers, ``data-*``) or the string names a module, and the text between the tags of
JSX inside an expression. Offsets are ``str`` indices.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["MARKUP_KEYS", "PROSE_PROPS", "JsxScanner", "NotMdx", "opens_tag"]

#: a card or callout, an image's alt text, a snippet's text).
PROSE_PROPS = frozenset(
    "title label description alt caption summary heading subtitle text tooltip content "
    "question answer aria-label".split()
)
#: Attributes and object keys whose values are markup or addresses, never prose.
MARKUP_KEYS = frozenset(
    "className class style href src srcSet id key ref icon image img link url to target "
    "rel width height color variant size sizes lang language slot as layout shape theme "
    "mode align fill stroke viewBox xmlns loading component components".split()
)

_WORD = re.compile(r"[\w$]+")
_BREAK = re.compile(r"#|[ \t]*(?:`{3,}|~{3,})")  # lines that end an unfinished ESM block
_NAME_START = re.compile(r"[A-Za-z_$]")
_NAME = re.compile(r"[\w$.:-]*")
_ATTR = re.compile(r"[A-Za-z_$:][\w$.:-]*")
_KEY_BEFORE = re.compile(r"""(?:([\w$-]+)|"([\w$-]+)"|'([\w$-]+)')[ \t]*:[ \t\n]*\Z""")
_JSX_BEFORE = frozenset("([{,=:?&|!>;")  # where a '<' in JavaScript opens JSX
_PAIRS = {"(": ")", "[": "]", "{": "}"}


class NotMdx(Exception):
    """The construct does not parse as MDX: the caller reads it as markdown."""


class JsxScanner:
    """The scanners of one page and what they mark (module docstring).

    Args:
        text: the decoded page.

    Attributes:
        drop: one byte a character: 1 where a reader does not see it.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.drop = bytearray(self.n)  # 1: a reader does not see it
        self.keeps: list[tuple[int, int]] = []  # kept inside the construct being read

    def construct(self, i: int, read: Callable[[int], int]) -> int:
        """Read the construct at ``i`` with ``read(i)`` (its end); all of it goes but its keeps.

        Returns ``i`` itself when it does not parse (nothing marked).
        """
        self.keeps = []
        try:
            end = read(i)
        except NotMdx:
            return i
        self.drop[i:end] = b"\1" * (end - i)
        for a, b in self.keeps:
            self.drop[a:b] = bytes(b - a)
        self.keeps = []
        return end

    # -- JavaScript ----------------------------------------------------------------

    def js(self, i: int, close: str, key: str | None, stop_blank: bool = False) -> int:
        """End (after ``close``) of the JavaScript from ``i``; marks its strings kept or not.

        Args:
            i: where the code starts (after the opening brace, or a statement's start).
            close: the character that ends it at depth 0 (``"}"``), or ``""``: a
                statement that ends at a blank line (``stop_blank``).
            key: the attribute that holds the expression (its strings are markup when
                it is in :data:`MARKUP_KEYS`), else ``None``.
            stop_blank: end at the first blank line at depth 0 (ESM), or before a
                heading or a fence at column 0 (where MDX would fail: the markdown after
                it is kept).

        Raises:
            NotMdx: the code does not end.
        """
        text, n = self.text, self.n
        depth: list[str] = []
        markup = _markup(key)
        prev = "("  # the last significant character (a '<' after it opens JSX)
        while i < n:
            ch = text[i]
            if ch in " \t\r\n":
                if ch == "\n" and stop_blank and not depth and _statement_ends(text, i):
                    return i
                i += 1
            elif ch in _PAIRS:
                depth.append(_PAIRS[ch])
                prev, i = ch, i + 1
            elif ch in ")]}":
                if not depth:
                    if ch == close:
                        return i + 1
                    raise NotMdx
                if depth.pop() != ch:
                    raise NotMdx
                prev, i = ch, i + 1
            else:
                i, prev = self._atom(i, prev, markup)
        if stop_blank and not depth:
            return n
        raise NotMdx

    def _atom(self, i: int, prev: str, markup: bool) -> tuple[int, str]:
        """The JavaScript token at ``i`` (no bracket, no blank): ``(its end, prev)``."""
        text = self.text
        ch = text[i]
        if ch in "'\"":
            end = _string_end(text, i)
            if not markup and not self._module(i) and not _markup(self._key(i)):
                self._keep(i + 1, end - 1)
            return end, "a"
        if ch == "`":
            return self._template(i, markup), "a"
        if ch == "/" and text[i + 1 : i + 2] in ("/", "*"):
            return self._comment(i), prev
        if ch == "<" and prev in _JSX_BEFORE and opens_tag(text, i):
            return self.element(i), "a"
        m = _WORD.match(text, i)
        if m is not None:
            return m.end(), "(" if m.group() in ("return", "yield", "await") else "a"
        return i + 1, ch

    def _key(self, i: int) -> str | None:
        """The object key a string at ``i`` is the value of (``key: '...'``), if any."""
        m = _KEY_BEFORE.search(self.text, max(0, i - 64), i)
        return None if m is None else (m.group(1) or m.group(2) or m.group(3))

    def _module(self, i: int) -> bool:
        """Whether the string at ``i`` names a module (``from '...'``, ``import('...')``)."""
        head = self.text[max(0, i - 12) : i].rstrip()
        return head.endswith(("from", "import", "import(", "require("))

    def _keep(self, a: int, b: int) -> None:
        if b > a:
            self.keeps.append((a, b))

    def _template(self, i: int, markup: bool) -> int:
        """End of the template literal at ``i``; its text kept (not its ``${}``)."""
        text, n = self.text, self.n
        j = i + 1
        start = j
        while j < n:
            ch = text[j]
            if ch == "\\":
                j += 2
                continue
            if ch == "`":
                if not markup:
                    self._keep(start, j)
                return j + 1
            if ch == "$" and j + 1 < n and text[j + 1] == "{":
                if not markup:
                    self._keep(start, j)
                j = self.js(j + 2, "}", "style" if markup else None)
                start = j
                continue
            j += 1
        raise NotMdx

    def _comment(self, i: int) -> int:
        text = self.text
        if text[i + 1] == "/":
            eol = text.find("\n", i)
            return self.n if eol == -1 else eol
        end = text.find("*/", i + 2)
        if end == -1:
            raise NotMdx
        return end + 2

    # -- JSX -----------------------------------------------------------------------

    def tag(self, i: int) -> tuple[int, str, bool]:
        """Parse the tag at ``i`` (``<`` or ``</``): ``(end, name, closed)``.

        ``closed``: a self-closing tag (``/>``) or a closing tag. Prose attributes' values
        are kept.

        Raises:
            NotMdx: not a tag.
        """
        text, n = self.text, self.n
        j = i + 1
        closing = text[j : j + 1] == "/"
        j += closing
        m = _NAME.match(text, j)
        name, j = (m.group(), m.end()) if m is not None else ("", j)
        if name and (text.startswith("//", j) or text[j : j + 1] == ":"):
            raise NotMdx  # an autolink <https://...>
        while True:
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j >= n:
                raise NotMdx
            if text[j] == ">":
                return j + 1, name, closing
            if text.startswith("/>", j):
                return j + 2, name, True
            if text[j] == "{":  # a spread {...props}
                j = self.js(j + 1, "}", "style")
                continue
            a = _ATTR.match(text, j)
            if a is None or closing:
                raise NotMdx
            j = a.end()
            while j < n and text[j] in " \t":
                j += 1
            if text[j : j + 1] == "=":  # else a boolean attribute
                j = self._value(j + 1, a.group())

    def _value(self, j: int, prop: str) -> int:
        """End of the value of attribute ``prop`` that starts at ``j`` (after ``=``)."""
        text, n = self.text, self.n
        while j < n and text[j] in " \t\r\n":
            j += 1
        ch = text[j : j + 1]
        if ch in ("'", '"'):
            end = text.find(ch, j + 1)
            if end == -1:
                raise NotMdx
            if prop in PROSE_PROPS:
                self._keep(j + 1, end)
            return end + 1
        if ch == "{":
            return self.js(j + 1, "}", prop)
        if ch == "<":
            return self.element(j)
        raise NotMdx

    def element(self, i: int) -> int:
        """End of the JSX element at ``i`` inside JavaScript (its children's text kept)."""
        end, name, closed = self.tag(i)
        if closed:
            return end
        text, n = self.text, self.n
        j = seg = end  # seg: where the children's current run of text starts
        depth = 1
        while j < n:
            ch = text[j]
            if ch == "{":
                self._keep(seg, j)
                j = seg = self.js(j + 1, "}", None)
                continue
            if ch == "<":
                self._keep(seg, j)
                e, _, c = self.tag(j)
                if text[j + 1 : j + 2] == "/":
                    depth -= 1
                    if depth == 0:
                        return e
                elif not c:
                    depth += 1
                j = seg = e
                continue
            j += 1
        raise NotMdx


def opens_tag(text: str, i: int) -> bool:
    """Whether the ``<`` at ``i`` opens a tag (a name, a fragment or a closing tag follows)."""
    nxt = text[i + 1 : i + 2]
    return bool(nxt) and (nxt in ">/" or _NAME_START.match(nxt) is not None)


def _statement_ends(text: str, i: int) -> bool:
    """Whether an ESM statement at depth 0 ends at the line end ``i``.

    It does before a blank line, the end, or a heading or fence at column 0.
    """
    j = i + 1
    n = len(text)
    while j < n and text[j] in " \t":
        j += 1
    return j >= n or text[j] == "\n" or _BREAK.match(text, i + 1) is not None


def _markup(key: str | None) -> bool:
    return key is not None and (
        key in MARKUP_KEYS or (key[:2] == "on" and key[2:3].isupper()) or key.startswith("data-")
    )


def _string_end(text: str, i: int) -> int:
    """End (after the quote) of the JavaScript string at ``i``.

    Raises:
        NotMdx: unclosed on its line.
    """
    quote = text[i]
    j = i + 1
    n = len(text)
    while j < n:
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == quote:
            return j + 1
        if ch == "\n":
            break
        j += 1
    raise NotMdx
