"""How much text a file may become: a bound on every reader and rendering that expands.

A few bytes can stand for a great deal of text: an AsciiDoc attribute reference
(``{big}``) for the attribute's value, a PDF's compressed stream for what it inflates
to, a form a PDF page draws a thousand times for a thousand copies of its text, an
HTML table row for as many cells as the widest row has. A reader or a rendering that
expands without a bound turns a small file into millions of chunks: a 20,027-byte
AsciiDoc file (a 10,000-character attribute referenced 2,000 times) made 14,650 chunks
in 57 s and 1.1 GB of memory.

So what a format makes of a file (the reader's text, and the clean rendering a
strategy embeds) is at most :data:`MAX_EXPANSION` characters per byte of the file, and
at least :data:`MIN_LIMIT` characters whatever its size (:func:`expansion_limit`).
Real documents stay far below it: text formats render to about their own size, HTML
and notebooks to less, a PDF's text layer to one or two characters per byte of the
file. Each expanding step counts what it makes as it makes it (an
:class:`OutputBudget`) and stops at the bound, so a file beyond it costs memory of the
order of the bound, never of what it would have become; it is then skipped with an
:class:`ExpansionError`, whose message is its one line in ``status``.
"""

from __future__ import annotations

from ingestd.chunkers.readers.document import FormatError

__all__ = [
    "MAX_EXPANSION",
    "MIN_LIMIT",
    "ExpansionError",
    "OutputBudget",
    "expansion_limit",
]

#: Most characters of text a format may make per byte of the file it read.
MAX_EXPANSION = 8
#: Characters of text any file may make, however small (a short file with a few
#: attribute references).
MIN_LIMIT = 16 * 1024


def expansion_limit(size: int) -> int:
    """Most characters of text a file of ``size`` bytes may become.

    ``max(MIN_LIMIT, MAX_EXPANSION * size)``.
    """
    return max(MIN_LIMIT, MAX_EXPANSION * size)


class ExpansionError(FormatError):
    """A file would become more text than :func:`expansion_limit` allows; it is skipped.

    Args:
        size: the file's size, in bytes (for a text format: its characters).
        what: what expanded (``AsciiDoc attribute references``, ``a PDF stream``...).
        limit: the bound that was passed (default :func:`expansion_limit` of ``size``).
        unit: what ``limit`` counts: ``characters`` of text, or ``bytes`` (a stream).
        ratio: the bound per byte of the file (``limit`` is this many times ``size``,
            or a floor).
    """

    def __init__(
        self,
        size: int,
        what: str,
        limit: int | None = None,
        unit: str = "characters",
        ratio: int = MAX_EXPANSION,
    ) -> None:
        self.size = size
        self.what = what
        self.limit = expansion_limit(size) if limit is None else limit
        bound = (
            f"at most {ratio}x its {size:,} bytes"
            if self.limit == ratio * size
            else f"at most {self.limit:,} for a file of {size:,} bytes"
        )
        super().__init__(f"expands to over {self.limit:,} {unit} ({what}; {bound}); skipped")


class OutputBudget:
    """Counts the characters an expanding step makes, and stops it at the bound.

    Args:
        size: the size of what was read, in bytes (a text format's characters).
        what: what expands, for the error's message.

    Attributes:
        limit: most characters allowed (:func:`expansion_limit` of ``size``).
        spent: characters made so far.
    """

    __slots__ = ("limit", "size", "spent", "what")

    def __init__(self, size: int, what: str) -> None:
        self.size = size
        self.what = what
        self.limit = expansion_limit(size)
        self.spent = 0

    def spend(self, n: int) -> None:
        """Count ``n`` more characters.

        Raises:
            ExpansionError: the total passed :attr:`limit`.
        """
        self.spent += n
        if self.spent > self.limit:
            raise ExpansionError(self.size, self.what, self.limit)

    def check(self, total: int) -> None:
        """Check a total made elsewhere (before it is built).

        Raises:
            ExpansionError: ``total`` is over :attr:`limit`.
        """
        if total > self.limit:
            raise ExpansionError(self.size, self.what, self.limit)
