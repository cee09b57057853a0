"""The mixed tree of ``retrieval.py --sets formats`` and its question set.

The tree is made at run time from the shared corpora by the tools the format tests use
(tests/format_inputs.py: nbformat, MkDocs with the Material theme, fpdf2, pandoc):

* ``notebooks/``: Textual's guide and how-to pages (mkdocs-docs) as Jupyter notebooks
  (prose as markdown cells, Python fences as code cells with outputs);
* ``site/``: Textual's widget pages built as a MkDocs Material site (navigation,
  header, sidebars and footer included);
* ``pdf/``: chapters 4 to 9 of the Rust book (history/base) as PDFs with an outline;
* ``adoc/``: Sphinx's extension pages (rst-docs usage/extensions) converted to AsciiDoc;
* ``md/``: OpenTelemetry's concept pages (md-docs docs/concepts), markdown as they are.

The questions (``data/formats-qa.jsonl``) are those of the four question sets of
``qa/`` whose gold page is in the tree, their answers located in the text ingestd
extracts from the page's file (:func:`locate`: the same words in the same order,
whatever lies between them) and stored as that extracted text, so each answer is
verbatim in the extracted text. ``python bench/_formats.py`` writes the file again
(after a change of the tree or of a reader); ``retrieval.py`` locates an answer the
same way when the tools made a slightly different text.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPORA = REPO.parent / "shared" / "corpora"
QA = HERE / "data" / "formats-qa.jsonl"

#: (question set, corpus folder, pages under it (prefixes), tree folder, format)
PARTS = (
    ("mkdocs-docs", "mkdocs-docs", ("guide/", "how-to/"), "notebooks", "ipynb"),
    ("mkdocs-docs", "mkdocs-docs", ("widgets/",), "site", "html"),
    ("rust-book", "history/base", tuple(f"src/ch0{n}-" for n in range(4, 10)), "pdf", "pdf"),
    ("rst-docs", "rst-docs", ("usage/extensions/",), "adoc", "adoc"),
    ("md-docs", "md-docs", ("docs/concepts/",), "md", "md"),
)
_WORD = re.compile(r"[^\W_]+")  # letters and digits: `_emphasis_` is the word emphasis
_ROLE = re.compile(r":[\w:-]+:(?=`)")  # reStructuredText roles (pandoc leaves no trace)


def _pages(corpus: str, prefixes: tuple[str, ...], suffix: str) -> list[str]:
    base = CORPORA / corpus
    return sorted(
        p.relative_to(base).as_posix()
        for p in base.rglob("*" + suffix)
        if p.relative_to(base).as_posix().startswith(prefixes)
    )


def tree_path(folder: str, fmt: str, rel: str) -> str:
    """Where corpus page ``rel`` is in the tree (``site/``: the page MkDocs builds)."""
    if fmt == "html":
        stem = rel.removesuffix(".md")
        return f"{folder}/{stem.removesuffix('/index')}/index.html"
    if fmt == "md":
        return f"{folder}/{rel}"
    stem = re.sub(r"\.(md|rst)$", "", rel)
    return f"{folder}/{stem}.{fmt}"


def build(dest: Path) -> Path:
    """Write the mixed tree into ``dest`` (emptied first); returns ``dest``."""
    sys.path.insert(0, str(REPO))
    from tests import format_inputs as fi

    if dest.exists():
        shutil.rmtree(dest)
    for _, corpus, prefixes, folder, fmt in PARTS:
        base = CORPORA / corpus
        suffix = ".rst" if corpus == "rst-docs" else ".md"
        pages = _pages(corpus, prefixes, suffix)
        if fmt == "html":
            built = fi.build_site(dest / "_build", pages=tuple(pages), corpus=base)
            shutil.move(built, dest / folder)
            shutil.rmtree(dest / "_build")
            for name in ("assets", "search", "sitemap.xml", "sitemap.xml.gz", "404.html"):
                target = dest / folder / name
                if target.is_dir():
                    shutil.rmtree(target)
                elif target.exists():
                    target.unlink()
            continue
        for rel in pages:
            out = dest / tree_path(folder, fmt, rel)
            if fmt == "ipynb":
                fi.write_notebook(base / rel, out)
            elif fmt == "pdf":
                fi.write_pdf(base / rel, out)
            elif fmt == "adoc":
                fi.write_asciidoc(base / rel, "rst", out)
            else:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes((base / rel).read_bytes())
    return dest


def locate(answer: str, text: str) -> tuple[int, int] | None:
    """``(start, end)`` of ``answer``'s words, in order, in ``text`` (anything between them).

    Exact first; else the words of the answer with any non-word characters between
    them (markup a reader renders differently, lines a PDF wraps elsewhere).
    """
    at = text.find(answer)
    if at >= 0:
        return at, at + len(answer)
    words = _WORD.findall(_ROLE.sub("", answer))
    if not words:
        return None
    pattern = r"[\W_]*".join(re.escape(w) for w in words)
    m = re.search(r"(?<![^\W_])" + pattern + r"(?![^\W_])", text)
    return (m.start(), m.end()) if m else None


def questions(read: Callable[[str], str]) -> list[dict[str, Any]]:
    """The question set: each ``qa/`` question whose gold page is in the tree and whose
    answer :func:`locate` finds in the extracted text (``read(tree path) -> text``)."""
    out = []
    for qa_set, corpus, prefixes, folder, fmt in PARTS:
        suffix = ".rst" if corpus == "rst-docs" else ".md"
        pages = set(_pages(corpus, prefixes, suffix))
        for line in (CORPORA / "qa" / f"{qa_set}.jsonl").read_text(encoding="utf-8").splitlines():
            q = json.loads(line)
            if q["path"] not in pages:
                continue
            path = tree_path(folder, fmt, q["path"])
            text = read(path)
            span = locate(q["answer"], text)
            if span is None:
                print(f"  {qa_set} {q['id']}: answer not in the text of {path}; left out")
                continue
            out.append(
                {
                    "id": f"{fmt}-{q['id']}",
                    "question": q["question"],
                    "path": path,
                    "answer": text[span[0] : span[1]],
                    "kind": q["kind"],
                    "from": f"qa/{qa_set}.jsonl {q['id']}",
                }
            )
    return out


def reader_of(root: Path) -> Callable[[str], str]:
    """``tree path -> extracted text`` by the default rules' readers."""
    from ingestd.daemon.config import load_config
    from ingestd.daemon.sync.preparing.rules import RuleSet, build_context
    from ingestd.store.embedding.embedder import model_info

    cfg = load_config(None, roots=[root])
    ctx, tok = build_context(cfg)
    rules = RuleSet(cfg.rules, ctx, tok, model_info(cfg.embedding.model).fingerprint)
    return lambda rel: rules.match(rel).reader.read((root / rel).read_bytes()).text


def main() -> None:
    """Build the tree in a temporary folder and write :data:`QA` from it."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-formats-") as tmp:
        root = build(Path(tmp) / "tree")
        qs = questions(reader_of(root))
    QA.parent.mkdir(parents=True, exist_ok=True)
    QA.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in qs), encoding="utf-8")
    by: dict[str, int] = {}
    for q in qs:
        by[q["id"].split("-")[0]] = by.get(q["id"].split("-")[0], 0) + 1
    print(f"{len(qs)} questions written to {QA.relative_to(REPO)}: {by}")


if __name__ == "__main__":
    main()
