"""Real inputs of every format, made at test time from the shared corpora by real tools.

No file of a public repository is committed here: each input is built from the
documentation in ``shared/corpora`` (licenses in its ``LICENSES/``) when a test
session first asks for it:

* **notebooks** (nbformat): pages of Textual's docs (``mkdocs-docs``), their prose as
  markdown cells (a heading in a cell of its own, as notebooks often have it), their
  Python fences as code cells, each with a stream output and an image;
* **HTML** (MkDocs with the Material theme): a subset of Textual's docs built as a
  site, with the theme's real navigation, header, sidebars and footer;
* **PDF** (fpdf2): chapters of the Rust book (``history/base``) with headings, an
  outline, monospaced listings and page breaks; one without an outline (headings by
  font size only), one encrypted with a password, one of images only (no text
  layer), one cut short, and a page tree of a million pages; and, written operator by
  operator, one spaced as TeX spaces words (:func:`tex_spaced_pdf`);
* **AsciiDoc** (pandoc): Sphinx pages (``rst-docs``) and OpenTelemetry pages
  (``md-docs``) converted to AsciiDoc.

:func:`build_tree` writes them all into one folder, beside two markdown pages.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import CORPORA

__all__ = [
    "ADOC_PAGES",
    "NOTEBOOK_PAGES",
    "PDF_PAGES",
    "SITE_PAGES",
    "build_site",
    "build_tree",
    "check_chunks",
    "heading_ends",
    "markdown_blocks",
    "output_marker",
    "pdf_bomb",
    "tex_spaced_pdf",
    "write_asciidoc",
    "write_image_pdf",
    "write_notebook",
    "write_pdf",
]

#: mkdocs-docs pages written as notebooks (Python code).
NOTEBOOK_PAGES = ("guide/reactivity.md", "guide/workers.md", "guide/actions.md")
#: mkdocs-docs pages built into the HTML site.
SITE_PAGES = (
    "guide/reactivity.md",
    "guide/layout.md",
    "widgets/data_table.md",
    "guide/workers.md",
    "FAQ.md",
)
#: Rust book chapters (history/base) written as PDFs.
PDF_PAGES = (
    "src/ch04-01-what-is-ownership.md",
    "src/ch08-02-strings.md",
    "src/ch15-05-interior-mutability.md",
)
#: Pages (corpora-relative, with their format) converted to AsciiDoc.
ADOC_PAGES = (
    ("rst-docs/usage/quickstart.rst", "rst"),
    ("rst-docs/usage/extensions/todo.rst", "rst"),
    ("md-docs/docs/collector/resiliency.md", "gfm"),
)

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _body(text: str) -> str:
    """``text`` without YAML front matter."""
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            return text[text.find("\n", end + 1) + 1 :]
    return text


def markdown_blocks(text: str) -> list[tuple[str, str, str]]:
    """``(kind, info, text)`` of a markdown page: ``heading`` (info: level), ``code``
    (info: language), ``prose`` (paragraphs between them)."""
    out: list[tuple[str, str, str]] = []
    lines = _body(text).split("\n")
    prose: list[str] = []

    def flush() -> None:
        if "\n".join(prose).strip():
            out.append(("prose", "", "\n".join(prose).strip("\n")))
        prose.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if m:
            fence, lang = m.group(1), m.group(2)
            j = i + 1
            while j < len(lines) and not lines[j].startswith(fence):
                j += 1
            flush()
            out.append(("code", lang, "\n".join(lines[i + 1 : j])))
            i = j + 1
            continue
        h = _HEADING.match(line)
        if h:
            flush()
            out.append(("heading", str(len(h.group(1))), h.group(2)))
        else:
            prose.append(line)
        i += 1
    flush()
    return out


def output_marker(cell: int) -> str:
    """The text of the stream output of code cell ``cell`` (no page holds it)."""
    return f"zqoutput {cell}: finished without errors"


def write_notebook(page: Path, dest: Path) -> Path:
    """A notebook of a markdown page (see the module docstring)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    cells = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            cells.append(new_markdown_cell("\n\n".join(pending)))
            pending.clear()

    for k, (kind, info, text) in enumerate(markdown_blocks(page.read_text(encoding="utf-8"))):
        if kind == "heading":
            flush()
            if k % 2:  # every other heading in a cell of its own
                cells.append(new_markdown_cell("#" * int(info) + " " + text))
            else:
                pending.append("#" * int(info) + " " + text)
        elif kind == "code" and info in ("python", "py"):
            flush()
            n = len(cells) + 1
            outputs = [
                new_output("stream", name="stdout", text=output_marker(n) + "\n"),
                new_output(
                    "display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
                ),
            ]
            cells.append(new_code_cell(text, execution_count=n, outputs=outputs))
        elif kind == "code":
            pending.append(f"```{info}\n{text}\n```")
        else:
            pending.append(text)
    flush()
    nb = new_notebook(
        cells=cells,
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(nbformat.writes(nb), encoding="utf-8")
    return dest


_MKDOCS_YML = """\
site_name: Textual (subset)
theme:
  name: material
  features: [navigation.sections, toc.follow]
markdown_extensions:
  - admonition
  - attr_list
  - md_in_html
  - tables
  - toc:
      permalink: true
  - pymdownx.superfences
  - pymdownx.tabbed:
      alternate_style: true
  - pymdownx.highlight
  - pymdownx.inlinehilite
  - pymdownx.keys
  - pymdownx.details
"""


def build_site(
    dest: Path, pages: tuple[str, ...] = SITE_PAGES, corpus: Path = CORPORA / "mkdocs-docs"
) -> Path:
    """Build ``pages`` of ``corpus`` with MkDocs and the Material theme; returns the site folder."""
    src = dest / "project"
    for rel in pages:
        target = src / "docs" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((corpus / rel).read_bytes())
    (src / "mkdocs.yml").write_text(_MKDOCS_YML, encoding="utf-8")
    site = dest / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "-q",
            "-f",
            str(src / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        check=True,
        capture_output=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    return site


def _latin(text: str) -> str:
    return text.encode("cp1252", "replace").decode("cp1252")


def write_pdf(page: Path, dest: Path, *, outline: bool = True, password: str | None = None) -> Path:
    """A PDF of a markdown page: headings (and an outline), prose, monospaced listings."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.core_fonts_encoding = "windows-1252"
    pdf.set_auto_page_break(True, 15)
    if password is not None:
        pdf.set_encryption(owner_password="owner-" + password, user_password=password)
    pdf.add_page()
    sizes = {1: 20, 2: 16, 3: 13}
    for kind, info, text in markdown_blocks(page.read_text(encoding="utf-8")):
        if kind == "heading":
            level = int(info)
            pdf.set_font("Helvetica", "B", sizes.get(level, 12))
            if outline:
                pdf.start_section(_latin(text), level=level - 1)
            pdf.multi_cell(0, 9, _latin(text), new_x="LMARGIN", new_y="NEXT")
        elif kind == "code":
            pdf.set_font("Courier", "", 8.5)
            for line in text.split("\n"):
                pdf.multi_cell(0, 4.2, _latin(line) or " ", new_x="LMARGIN", new_y="NEXT")
        else:
            pdf.set_font("Helvetica", "", 11)
            for para in re.split(r"\n\s*\n", text):
                if para.strip():
                    joined = " ".join(para.split())
                    pdf.multi_cell(0, 5.5, _latin(joined), new_x="LMARGIN", new_y="NEXT")
                    pdf.ln(2.5)
        pdf.ln(2)
    dest.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(dest))
    return dest


def write_image_pdf(page: Path, dest: Path) -> Path:
    """A PDF whose pages are pictures of a page's text: no text layer."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw

    text = _body(page.read_text(encoding="utf-8"))
    pdf = FPDF()
    for part in range(2):
        img = Image.new("L", (800, 1000), 255)
        draw = ImageDraw.Draw(img)
        for k, line in enumerate(text.split("\n")[part * 40 : part * 40 + 40]):
            draw.text((20, 20 + 24 * k), _latin(line)[:100], fill=0)
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        pdf.add_page()
        pdf.image(buf, x=10, y=10, w=190)
    dest.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(dest))
    return dest


def pdf_bomb(pages: int = 1_000_000, fanout: int = 1000) -> bytes:
    """A small PDF whose page tree holds ``pages`` pages (one page object, referenced again
    and again): the classic page-count bomb."""
    outer = pages // fanout
    page_id = 3 + outer
    mids = [
        b"<< /Type /Pages /Parent 2 0 R /Count %d /Kids [" % fanout
        + b" ".join([b"%d 0 R" % page_id] * fanout)
        + b"] >>"
        for _ in range(outer)
    ]
    kids = b" ".join(b"%d 0 R" % (3 + k) for k in range(outer))
    stream = b"BT /F1 12 Tf 20 100 Td (Hello again) Tj ET"
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count %d /Kids [" % pages + kids + b"] >>",
        *mids,
        b"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 200 200] /Contents %d 0 R "
        b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (page_id + 1, page_id + 2),
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _pdf_file(objs)


def _pdf_file(objs: list[bytes]) -> bytes:
    """A PDF of numbered objects (the first is the catalog), with its xref table."""
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


def tex_spaced_pdf(words: list[str], per_line: int = 11, per_page: int = 40) -> bytes:
    """A PDF that spaces words as TeX does: no space character, only a kerning offset.

    Each line is one ``TJ`` array of words with ``-333`` (a third of an em, TeX's
    interword space) between them, in Helvetica with an encoding whose code 32 is not
    a space but a wide glyph (``/Differences [32 /M]``, width 833): TeX's fonts have
    no space at 32 either (OT1 puts a suppress mark there; a subset CID font
    whatever glyph got CID 32). An extractor that decides word gaps by "the width
    of the space character" glues this text; one that reads the glyphs' positions
    does not. Words must be ASCII letters and punctuation.
    """
    from fpdf.fonts import CORE_FONTS_CHARWIDTHS

    metrics = CORE_FONTS_CHARWIDTHS["helvetica"]
    widths = [833] + [int(metrics[chr(c)]) for c in range(33, 127)]
    lines = [words[i : i + per_line] for i in range(0, len(words), per_line)]
    pages = [lines[i : i + per_page] for i in range(0, len(lines), per_page)]
    n = len(pages)
    font_id, first_page = 3, 4
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count %d /Kids [" % n
        + b" ".join(b"%d 0 R" % (first_page + 2 * k) for k in range(n))
        + b"] >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /FirstChar 32 /LastChar 126 "
        b"/Widths [" + b" ".join(b"%d" % w for w in widths) + b"] "
        b"/Encoding << /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [32 /M] >> >>",
    ]
    for k, page in enumerate(pages):
        ops = [b"BT /F1 10 Tf 12 TL 72 760 Td"]
        for line in page:
            parts = b"-333".join(b"(" + w.encode("ascii") + b")" for w in line)
            ops.append(b"[" + parts + b"] TJ T*")
        ops.append(b"ET")
        stream = b"\n".join(ops)
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (first_page + 2 * k + 1, font_id)
        )
        objs.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return _pdf_file(objs)


def write_asciidoc(page: Path, fmt: str, dest: Path) -> Path:
    """AsciiDoc converted by pandoc from a reStructuredText or markdown page."""
    import pypandoc

    text = _body(page.read_text(encoding="utf-8"))
    out = pypandoc.convert_text(text, "asciidoc", format=fmt, extra_args=["--wrap=preserve"])
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(out, encoding="utf-8")
    return dest


def build_tree(dest: Path) -> Path:
    """The mixed tree: notebooks, an HTML site, PDFs, AsciiDoc beside markdown pages.

    Layout: ``notebooks/*.ipynb``, ``site/**/index.html``, ``pdf/*.pdf`` (and
    ``pdf/bad/`` with the broken ones), ``adoc/*.adoc``, ``md/*.md``.
    """
    mk = CORPORA / "mkdocs-docs"
    for rel in NOTEBOOK_PAGES:
        write_notebook(mk / rel, dest / "notebooks" / (Path(rel).stem + ".ipynb"))
    build_site(dest / "_build")
    (dest / "_build" / "site").rename(dest / "site")
    shutil.rmtree(dest / "_build")
    for name in ("assets", "search", "sitemap.xml", "sitemap.xml.gz", "404.html"):
        target = dest / "site" / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    book = CORPORA / "history" / "base"
    for rel in PDF_PAGES:
        write_pdf(book / rel, dest / "pdf" / (Path(rel).stem + ".pdf"))
    bad = dest / "pdf" / "bad"
    write_pdf(book / PDF_PAGES[0], bad / "no-outline.pdf", outline=False)
    write_pdf(book / PDF_PAGES[0], bad / "encrypted.pdf", password="s3cret")
    write_image_pdf(book / PDF_PAGES[1], bad / "scanned.pdf")
    whole = (dest / "pdf" / (Path(PDF_PAGES[2]).stem + ".pdf")).read_bytes()
    (bad / "truncated.pdf").write_bytes(whole[: len(whole) // 3])
    (bad / "bomb.pdf").write_bytes(pdf_bomb())
    for rel, fmt in ADOC_PAGES:
        write_asciidoc(CORPORA / rel, fmt, dest / "adoc" / (Path(rel).stem + ".adoc"))
    for rel in ("guide/CSS.md", "getting_started.md"):
        (dest / "md").mkdir(parents=True, exist_ok=True)
        (dest / "md" / Path(rel).name).write_bytes((mk / rel).read_bytes())
    return dest


_ATX = re.compile(r" {0,3}#{1,6}[ \t]+\S")
_ADOC_TITLE = re.compile(r"={1,6}[ \t]+\S")
_MD_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_ADOC_VERBATIM = re.compile(r"(-{4,}|\.{4,}|\+{4,}|/{4,})[ \t]*$")


def heading_ends(text: str, style: str) -> list[int]:
    """Offsets where the heading lines of ``text`` end: ``markdown`` (ATX outside fences)
    or ``asciidoc`` (``=`` titles outside verbatim blocks)."""
    out = []
    fence: str | None = None
    pos = 0
    for line in text.split("\n"):
        if style == "markdown":
            m = _MD_FENCE.match(line)
            if m and (fence is None or (m.group(1)[0] == fence[0] and not line[m.end() :].strip())):
                fence = m.group(1) if fence is None else None
            elif fence is None and _ATX.match(line):
                out.append(pos + len(line))
        else:
            m = _ADOC_VERBATIM.match(line)
            if m and (fence is None or line.rstrip() == fence):
                fence = line.rstrip() if fence is None else None
            elif fence is None and _ADOC_TITLE.match(line):
                out.append(pos + len(line))
        pos += len(line) + 1
    return out


def check_chunks(text: str, chunks: list[Any], ctx: Any, heading_at: list[int]) -> None:
    """What every format's chunks keep: verbatim slices with the right lines, the budget
    and the model's limit, line boundaries, and no heading separated from what follows it.

    ``heading_at``: where the document's heading lines end.
    """
    from ingestd.chunkers.base import LineIndex

    lines = LineIndex(text)
    assert chunks, "no chunks"
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert (c.start_line, c.end_line) == lines.span(c.start, c.end)
        assert c.n_tokens <= 200, c.text[:80]
        assert ctx.model_sizer.count(c.embed_text) <= ctx.model_max_tokens, c.text[:80]
        assert c.start == 0 or text[c.start - 1] == "\n", f"starts inside a line: {c.text[:60]!r}"
        assert c.end == len(text) or text[c.end] == "\n", f"ends inside a line: {c.text[-60:]!r}"
    for end in heading_at:
        rest = len(text[end:]) - len(text[end:].lstrip())
        after = end + rest
        if after >= len(text):
            continue  # a heading at the very end: nothing follows it
        holder = [c for c in chunks if c.start < end <= c.end]
        heading = text[text.rfind("\n", 0, end) + 1 : end]
        assert holder and holder[0].end > after, f"heading separated from its text: {heading!r}"
