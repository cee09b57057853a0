"""Small files that a reader could turn into far more text: one maker per format.

Each is a file of a few bytes to a few tens of KB whose text, read without a bound,
is a hundred to ten thousand times its size (see
:mod:`ingestd.chunkers.readers.expansion`):

* AsciiDoc: an attribute referenced again and again (the two files of issue 41);
* HTML: a table whose first row is wide (every row is padded to it), lists nested
  hundreds deep (every item repeats the indentation), and an entity bomb in a document
  type (``<!ENTITY>`` declarations, which HTML never expands);
* notebooks: a kernel language name thousands of characters long on every code cell,
  and outputs of megabytes;
* PDF: a content stream that inflates to megabytes, and a form drawn thousands of
  times.
"""

from __future__ import annotations

import itertools
import json
import zlib

__all__ = [
    "adoc_attribute_bomb",
    "adoc_sentence_bomb",
    "html_entity_bomb",
    "html_nested_lists",
    "html_wide_table",
    "notebook_huge_outputs",
    "notebook_long_language",
    "pdf_form_drawn",
    "pdf_inflating_stream",
]


def adoc_attribute_bomb() -> bytes:
    """``:big:`` set to 10,000 ``x``, then ``{big}`` 2,000 times (20,027 bytes)."""
    text = "= Attribute bomb\n\n:big: " + "x" * 10_000 + "\n\n" + "{big}" * 2000 + "\n"
    return text.encode()


def adoc_sentence_bomb() -> bytes:
    """An attribute whose value is a sentence of 1,115 characters, referenced in every
    paragraph of a 3,906-byte file."""
    words = "the careful reader checks every attribute reference in this file before it is"
    sentence = " ".join(itertools.islice(itertools.cycle(words.split()), 180)).capitalize()
    head = "= Doc\n\n:big: " + sentence + ".\n\n"
    text = head + "{big}\n\n" * ((3906 - len(head)) // 7)
    return (text + "x" * (3906 - len(text))).encode()


def html_entity_bomb() -> bytes:
    """Ten nested entity declarations ("billion laughs") and 200 references to the last."""
    ents = ['<!ENTITY a0 "lol lol lol lol lol lol lol lol lol lol">']
    ents += [f'<!ENTITY a{k} "' + f"&a{k - 1};" * 10 + '">' for k in range(1, 10)]
    return (
        "<!DOCTYPE html [\n" + "\n".join(ents) + "\n]>\n<html><body><main><p>"
        + "&a9; " * 200 + "</p><p>Zqentity &amp; &lt;kept&gt; &#x41;</p></main></body></html>\n"
    ).encode()  # fmt: skip


def html_wide_table(cells: int = 2500) -> bytes:
    """A first row of ``cells`` cells, then ``cells`` rows of one cell (72 KB for 2,500)."""
    rows = "<tr>" + "<td>x</td>" * cells + "</tr>" + "<tr><td>y</td></tr>" * cells
    return f"<html><body><main><table>{rows}</table></main></body></html>\n".encode()


def html_nested_lists(depth: int = 250, items: int = 5000) -> bytes:
    """Lists nested ``depth`` deep holding ``items`` items (55 KB)."""
    body = "<ul><li>a" * depth + "<li>b</li>" * items + "</li></ul>" * depth
    return f"<html><body><main>{body}</main></body></html>\n".encode()


def _notebook(cells: list[dict[str, object]], language: str = "python") -> bytes:
    kernel = {"name": "k", "display_name": "k", "language": language}
    nb = {"cells": cells, "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb).encode()


def notebook_long_language(cells: int = 3000, chars: int = 3000) -> bytes:
    """``cells`` one-character code cells under a kernel language of ``chars`` characters."""
    code = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
    return _notebook([{**code, "source": "x"} for _ in range(cells)], "L" * chars)


def notebook_huge_outputs(lines: int = 150_000) -> bytes:
    """A markdown cell, and a code cell whose stream output is ``lines`` lines (7.7 MB)."""
    out = [f"output line of a long computation, step {i}\n" for i in range(lines)]
    return _notebook(
        [
            {"cell_type": "markdown", "metadata": {}, "source": "# Zqresults\n\nThe loop prints."},
            {
                "cell_type": "code",
                "execution_count": 1,
                "metadata": {},
                "source": "for i in range(150000):\n    print(i)",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": out}],
            },
        ]
    )


def _pdf(objs: list[bytes]) -> bytes:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    body = zlib.compress(data, 9)
    return b"<< /Length %d /Filter /FlateDecode%s >>\nstream\n" % (len(body), extra) + (
        body + b"\nendstream"
    )


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
_LINE = b"(The inflated stream repeats this sentence of prose, again and again.) Tj T*\n"
_CATALOG = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Count 1 /Kids [3 0 R] >>"]


def pdf_inflating_stream(lines: int = 250_000) -> bytes:
    """One page whose content stream of ``lines`` lines of text (19 MB) is 66 KB deflated."""
    content = b"BT /F1 10 Tf 12 TL 20 780 Td\n" + _LINE * lines + b"ET"
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 600 800] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>"
    )
    return _pdf([*_CATALOG, page, _stream(content), _FONT])


def pdf_form_drawn(draws: int = 4000) -> bytes:
    """One page drawing a form of 30 lines of text ``draws`` times (971 bytes for 4,000)."""
    form = b"BT /F1 10 Tf 12 TL 20 780 Td\n" + _LINE * 30 + b"ET"
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 600 800] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> /XObject << /X1 6 0 R >> >> >>"
    )
    xobject = (
        b" /Type /XObject /Subtype /Form /BBox [0 0 600 800] /Resources << /Font << /F1 5 0 R >> >>"
    )
    drawn = _stream(b"q\n" + b"/X1 Do\n" * draws + b"Q")
    return _pdf([*_CATALOG, page, drawn, _FONT, _stream(form, xobject)])
