"""PDF text extraction on real PDFs of several producers, against pdftotext.

Each PDF is read by the reference (poppler's ``pdftotext``, Debian's ``poppler-utils``:
for measuring only, never a dependency), by ingestd's reader (PDFium in a child
process) and, when installed, by pypdf (the reader before PDFium: ``pip install
pypdf``) and pdfminer.six. Per PDF and extractor:

* **glued**: lines holding a run of 20+ letters that the reference's text does not
  hold (``Thecomputationofthescores``), over the pages where the reference's own text
  holds no such run; a long word the PDF really holds (an index entry, an
  identifier) is not counted, nor is a page the PDF itself sets without gaps (the
  table of contents of ``reference.pdf``, overprinted past the page's edge: pdftotext
  reads it glued and cut). Those pages are counted apart (``pages left out``).
  Target for ingestd: < 1 % on each PDF;
* **words P / R**: the extractor's words (runs of letters) against the reference's, as
  multisets: precision (1 - words it made up, glued or split) and recall;
* **pages**: the share of each page's words found in the reference's same page (the
  page a chunk cites), averaged over the pages;
* seconds, and their ratio to pdftotext's in the same run.

The PDFs (``--dir``, default ``/tmp/bench-pdf-text``; ``--fetch`` makes them there,
with ``apt-get download`` and Debian's ``chromium`` and ``libreoffice-writer-nogui``):

| file | producer | Debian package (licence) |
| --- | --- | --- |
| ``auto-multiple-choice.en.pdf`` | DBLaTeX, xdvipdfmx | auto-multiple-choice-doc-pdf 1.6.0 |
| ``automultiplechoice.pdf`` | LaTeX, pdfTeX | the same (both GPL-2+) |
| ``manual.pdf`` | Sphinx's LaTeX, pdfTeX | why3-doc-pdf 1.5.1 (LGPL-2.1) |
| ``R-intro.pdf`` | Texinfo, pdfTeX | r-doc-pdf 4.2.2 (GPL-2) |
| ``refman.pdf`` | Doxygen's LaTeX, Ghostscript | siscone-doc-pdf 3.0.5 (GPL-2+) |
| ``reference.pdf`` | DBLaTeX, pdfTeX | docbook-xsl-doc-pdf 1.79.1 (X11) |
| ``live-manual.portrait.en.a4.pdf`` | LaTeX, xdvipdfmx | live-manual-pdf 20151217 (GPL-3+) |
| ``lo-*.pdf`` | LibreOffice Writer | pages of this documentation site (Apache-2.0) |
| ``chromium-*.pdf`` | Chromium's print (Skia) | pages of this documentation site (Apache-2.0) |

None of them is committed: the test suite makes its PDFs at test time
(``tests/format_inputs.py``, including one spaced as TeX spaces words).

Usage: ``python bench/pdf_text.py [--fetch] [--dir DIR] [--only NAME,...]``
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DIR = Path(tempfile.gettempdir()) / "bench-pdf-text"
PACKAGES = {
    "auto-multiple-choice-doc-pdf": (
        "auto-multiple-choice/auto-multiple-choice.en.pdf",
        "auto-multiple-choice/latex/automultiplechoice.pdf",
    ),
    "why3-doc-pdf": ("why3-doc-pdf/manual.pdf",),
    "r-doc-pdf": ("r-doc-pdf/manual/R-intro.pdf",),
    "siscone-doc-pdf": ("siscone-doc-pdf/pdf/refman.pdf",),
    "docbook-xsl-doc-pdf": ("docbook-xsl-doc-pdf/doc/reference.pdf",),
    "live-manual-pdf": ("live-manual/pdf/live-manual.portrait.en.a4.pdf",),
}
SITE_PAGES = ("guides/configuration", "guides/formats", "how-it-works/write-order")
GLUED = re.compile(r"[^\W\d_]{20,}")
WORD = re.compile(r"[^\W\d_]+")


def fetch(dest: Path) -> None:
    """Download and unpack the Debian packages; print the site's pages with two producers."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run(["apt-get", "download", *PACKAGES], cwd=work, check=True)
        for deb in work.glob("*.deb"):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "x")], check=True)
        for gz in (work / "x").rglob("*.pdf.gz"):
            if not gz.is_symlink():
                subprocess.run(["gunzip", "-f", str(gz)], check=True)
        for files in PACKAGES.values():
            for rel in files:
                shutil.copy(work / "x/usr/share/doc" / rel, dest / Path(rel).name)
        site = work / "site"
        subprocess.run(["mkdocs", "build", "-q", "-d", str(site)], cwd=REPO, check=True)
        for page in SITE_PAGES:
            name = page.rsplit("/", 1)[-1]
            html = site / page / "index.html"
            subprocess.run(
                ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                 "--no-pdf-header-footer", f"--print-to-pdf={dest / f'chromium-{name}.pdf'}",
                 html.as_uri()],
                check=True, capture_output=True,
            )  # fmt: skip
            shutil.copy(html, work / f"lo-{name}.html")
            subprocess.run(
                ["soffice", "--headless", "--infilter=HTML (StarWriter)",
                 "--convert-to", "pdf:writer_pdf_Export", "--outdir", str(dest),
                 str(work / f"lo-{name}.html")],
                check=True, capture_output=True,
            )  # fmt: skip


def pdftotext(data: bytes) -> str:
    """The reference: poppler's text, pages separated by form feeds."""
    done = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", "-", "-"], input=data, capture_output=True, check=True
    )
    return done.stdout.decode("utf-8", "replace")


def ingestd(data: bytes) -> str:
    """ingestd's reader (PDFium in a child process), bounds lifted."""
    from ingestd.chunkers.readers.pdf import PdfReader

    return PdfReader(max_pages=100_000, max_seconds=3600).read(data).text


def pypdf_text(data: bytes) -> str:
    """pypdf's plain extraction, the text the reader before PDFium was built on."""
    import io

    import pypdf

    pages = pypdf.PdfReader(io.BytesIO(data)).pages
    return "\n\f\n".join(page.extract_text() for page in pages)


def pdfminer_text(data: bytes) -> str:
    """pdfminer.six's layout analysis with its default parameters."""
    import io

    from pdfminer.high_level import extract_text

    return str(extract_text(io.BytesIO(data)))


def extractors() -> dict[str, Callable[[bytes], str]]:
    """The extractors that are installed, the reference first."""
    out: dict[str, Callable[[bytes], str]] = {"pdftotext": pdftotext, "ingestd": ingestd}
    for name, module, fn in (
        ("pypdf", "pypdf", pypdf_text),
        ("pdfminer", "pdfminer", pdfminer_text),
    ):
        try:
            __import__(module)
        except ImportError:
            print(f"({name} not installed: skipped)")
            continue
        out[name] = fn
    return out


def page_agreement(text: str, reference: str) -> float:
    """Mean share of each page's words found among the reference's same page's words."""
    pages, ref_pages = text.split("\f"), reference.split("\f")
    shares = []
    for page, ref in zip(pages, ref_pages, strict=False):
        words = Counter(WORD.findall(page))
        if words:
            shares.append(sum((words & Counter(WORD.findall(ref))).values()) / words.total())
    return sum(shares) / len(shares) if shares else 1.0


def glued_lines(text: str, reference: str) -> tuple[int, int]:
    """``(lines, glued lines)`` of ``text`` over the pages the reference reads unglued."""
    lines = glued = 0
    for page, ref in zip(text.split("\f"), reference.split("\f"), strict=False):
        if GLUED.search(ref):
            continue
        for line in page.splitlines():
            if line.strip():
                lines += 1
                glued += any(w not in ref for w in GLUED.findall(line))
    return lines, glued


def measure(path: Path, fns: dict[str, Callable[[bytes], str]]) -> list[str]:
    """One report line per extractor for the PDF at ``path``."""
    data = path.read_bytes()
    t0 = time.perf_counter()
    reference = pdftotext(data)
    base = time.perf_counter() - t0
    ref_words = Counter(WORD.findall(reference))
    left_out = sum(1 for page in reference.split("\f") if GLUED.search(page))
    rows = [f"  (pages left out of the glued lines: {left_out} of {reference.count(chr(12))})"]
    for name, fn in fns.items():
        t0 = time.perf_counter()
        text = fn(data)
        seconds = time.perf_counter() - t0
        lines, glued = glued_lines(text, reference)
        words = Counter(WORD.findall(text))
        common = sum((words & ref_words).values())
        share = 100 * glued / max(lines, 1)
        precision = common / max(words.total(), 1)
        recall = common / max(ref_words.total(), 1)
        rows.append(
            f"  {name:9} glued {glued:5}/{lines:6} = {share:5.2f} %"
            f"  words P {precision:.3f} R {recall:.3f}"
            f"  pages {page_agreement(text, reference):.3f}"
            f"  {seconds:6.2f} s ({seconds / max(base, 1e-3):5.1f}x pdftotext)"
        )
    return rows


def main() -> None:
    """Measure every PDF of ``--dir`` (fetching them first with ``--fetch``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--fetch", action="store_true", help="download and make the PDFs")
    parser.add_argument("--only", default="", help="extractors, comma-separated")
    args = parser.parse_args()
    if args.fetch:
        fetch(args.dir)
    if shutil.which("pdftotext") is None:
        sys.exit("pdftotext is missing: apt-get install poppler-utils")
    pdfs = sorted(args.dir.glob("*.pdf"))
    if not pdfs:
        sys.exit(f"no PDFs in {args.dir}: run with --fetch")
    fns = extractors()
    if args.only:
        fns = {k: v for k, v in fns.items() if k in args.only.split(",")}
    for path in pdfs:
        print(path.name, flush=True)
        for row in measure(path, fns):
            print(row, flush=True)


if __name__ == "__main__":
    main()
