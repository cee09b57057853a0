"""An HTML document as a tree whose every node knows its line in the file.

The tokenizer is the standard library's :class:`html.parser.HTMLParser` (character
references decoded, ``<script>``/``<style>`` content kept raw, lenient about
malformed markup); this module builds the element tree from its events with the
parts of the HTML tree-construction rules that decide where an element ends in the
pages documentation tools write: void elements, the end tags a start tag implies
(``<p>`` closed by a block, ``<li>`` by the next ``<li>``, cells and rows by the next
one, ``<dt>``/``<dd>``, ``<option>``), an end tag closing the elements still open
inside its element, and a stray end tag ignored. Nesting deeper than
:data:`MAX_DEPTH` elements is flattened the way Blink's HTML parser does it (its
``kMaximumHTMLParserDOMTreeDepth``, 512 there): an element opened at that depth is
attached beside the deepest one instead of inside it, so that the tree (and the
recursion of whatever walks it) stays bounded whatever the input; an end tag is
looked for among the innermost 1,024 open elements only, so that parsing takes time
linear in the input however deep it nests. Every :class:`Element` and
:class:`Text` records the 1-based line of the file where it starts, from the
tokenizer's own position, which no tree-building library exposes for text.

Input is fed in slices, so a caller can bound the time parsing takes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from html.parser import HTMLParser

__all__ = ["MAX_DEPTH", "Element", "Text", "TreeBuilder", "parse_html"]

#: Deepest nesting of elements in a tree (deeper ones are attached at this depth).
MAX_DEPTH = 256

VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
#: Elements a ``<p>`` does not stay open across (HTML's "close a p element").
_CLOSES_P = frozenset(
    "address article aside blockquote details dialog div dl fieldset figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 header hgroup hr main menu nav ol p pre section "
    "table ul".split()
)
#: start tag -> open elements it closes (up to, not across, the scope elements).
_IMPLIED = {
    "li": ("li",),
    "dt": ("dt", "dd"),
    "dd": ("dt", "dd"),
    "tr": ("tr", "td", "th"),
    "td": ("td", "th"),
    "th": ("td", "th"),
    "thead": ("tbody", "tfoot", "tr", "td", "th"),
    "tbody": ("thead", "tfoot", "tr", "td", "th"),
    "tfoot": ("thead", "tbody", "tr", "td", "th"),
    "option": ("option",),
}
_SCOPE = frozenset("ul ol dl table html body td th div".split())
_SLICE = 1 << 18  # characters fed to the tokenizer between two time checks
#: Open elements an end tag (or an implied end) is looked for among, innermost first:
#: a bound on the work per tag, so that deep nesting costs linear time, not quadratic.
_SCAN = 4 * MAX_DEPTH


class Text:
    """A run of character data.

    Attributes:
        data: the text, character references decoded.
        line: 1-based line of the file where it starts.
    """

    __slots__ = ("data", "line")

    def __init__(self, data: str, line: int) -> None:
        self.data, self.line = data, line


class Element:
    """An element with its attributes and children.

    Attributes:
        tag: the lower-case tag name.
        attrs: attribute name -> value (``""`` for a bare attribute).
        children: elements and text runs, in document order.
        line: 1-based line of the file where its start tag is.
    """

    __slots__ = ("attrs", "children", "line", "tag")

    def __init__(self, tag: str, attrs: dict[str, str], line: int) -> None:
        self.tag, self.attrs, self.line = tag, attrs, line
        self.children: list[Element | Text] = []

    @property
    def classes(self) -> list[str]:
        """The words of its ``class`` attribute."""
        return self.attrs.get("class", "").split()

    def iter(self) -> Iterator[Element]:
        """This element and every element below it, in document order."""
        stack: list[Element] = [self]
        while stack:
            el = stack.pop()
            yield el
            stack.extend(c for c in reversed(el.children) if isinstance(c, Element))

    def text(self) -> str:
        """All the text below it, concatenated."""
        out: list[str] = []
        stack: list[Element | Text] = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, Text):
                out.append(node.data)
            else:
                stack.extend(reversed(node.children))
        return "".join(out)


class TreeBuilder(HTMLParser):
    """Builds the :class:`Element` tree of a document fed to it (see the module docstring).

    Attributes:
        root: a ``#document`` element holding the top-level nodes.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, 1)
        self._open: list[Element] = [self.root]

    def _close_to(self, names: tuple[str, ...] | frozenset[str]) -> None:
        """Close the innermost open element named in ``names``, not across a scope."""
        for k in range(len(self._open) - 1, max(0, len(self._open) - 1 - _SCAN), -1):
            tag = self._open[k].tag
            if tag in names:
                del self._open[k:]
                return
            if tag in _SCOPE:
                return

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Open an element (closing the ones its start implies)."""
        if tag in _CLOSES_P:
            self._close_to(("p",))
        if tag in _IMPLIED:
            self._close_to(_IMPLIED[tag])
        el = Element(tag, {k: v or "" for k, v in attrs}, self.getpos()[0])
        # the parent: the innermost open element, or the one at MAX_DEPTH below the
        # root (the stack of open elements still grows, for end tags to match)
        self._open[min(len(self._open), MAX_DEPTH) - 1].children.append(el)
        if tag not in VOID:
            self._open.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """A self-closing tag: an element without children."""
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self._open[-1].tag == tag:
            self._open.pop()

    def handle_endtag(self, tag: str) -> None:
        """Close ``tag`` and what is open inside it.

        A ``tag`` not open among the innermost ``_SCAN`` open elements is ignored.
        """
        for k in range(len(self._open) - 1, max(0, len(self._open) - 1 - _SCAN), -1):
            if self._open[k].tag == tag:
                del self._open[k:]
                return

    def handle_data(self, data: str) -> None:
        """A run of text, at the tokenizer's position."""
        if data:
            self._open[-1].children.append(Text(data, self.getpos()[0]))


def parse_html(text: str, deadline: float | None = None) -> Element:
    """The tree of HTML ``text``.

    Args:
        text: the decoded document.
        deadline: a :func:`time.monotonic` time after which parsing stops.

    Raises:
        TimeoutError: parsing went past ``deadline``.
    """
    builder = TreeBuilder()
    for i in range(0, len(text), _SLICE):
        builder.feed(text[i : i + _SLICE])
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"parsed {i + _SLICE} of {len(text)} characters")
    builder.close()
    return builder.root
