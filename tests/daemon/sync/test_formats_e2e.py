"""The invariant on a tree of every format, across edits of each kind; read and search cite.

Notebooks, an HTML site, PDFs and AsciiDoc (made from the corpora at test time, see
:mod:`tests.format_inputs`) beside markdown are ingested with the default rules, then
edited the way they change in life: a notebook's markdown cell, a new code cell, an
output only; an HTML page's paragraph, its navigation only; a PDF made again from an
edited chapter; an AsciiDoc paragraph and a new section; a rename, a delete, a new
page, and a broken PDF replaced by a good one. After each sync the store equals a
from-scratch ingest (ids, payloads, sparse vectors) and ``verify`` is clean; the bad
files are failed documents whose error says why, and nothing else is harmed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.format_inputs import PDF_PAGES, write_pdf
from tests.helpers import (
    CORPORA,
    CountingEmbedder,
    assert_matches_oracle,
    fake_vectors,
    make_engine,
    run_cli,
)

BAD = {
    "pdf/bad/encrypted.pdf": "encrypted PDF (it needs a password); skipped",
    "pdf/bad/scanned.pdf": "PDF has no text layer",
    "pdf/bad/truncated.pdf": "not a readable PDF",
    "pdf/bad/bomb.pdf": "PDF has 1000000 pages (> the rule's max_pages 2000); skipped",
}


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _by_path(eng: Any) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for _, p in eng.resources.store.scroll("ingestd"):
        out.setdefault(p["path"], []).append(p)
    return out


@pytest.mark.timeout(900)  # the tree is made, ingested, edited and ingested again twice
@pytest.mark.parametrize(
    "model", ["fake", pytest.param("real", marks=pytest.mark.slow)], ids=["fake", "real-model"]
)
def test_every_format_matches_the_oracle_across_edits(
    tmp_path: Path, format_tree: Path, model: str, request: pytest.FixtureRequest
) -> None:
    """With the fake embedder (quick) and with the bundled model (what users run)."""
    embedder: CountingEmbedder = request.getfixturevalue(f"{model}_embedder")
    root = tmp_path / "docs"
    shutil.copytree(format_tree, root)
    state = tmp_path / "state"
    eng = make_engine(root, state, embedder)
    (name,) = eng.context.sources
    try:
        eng.sync(name)
        failed = dict(eng.resources.manifest.failed(name))
        assert set(failed) == set(BAD), failed
        for rel, words in BAD.items():
            assert words in failed[rel], failed[rel]
        points = _by_path(eng)
        assert {p["rule"] for ps in points.values() for p in ps} == {
            "notebook", "html", "pdf", "asciidoc", "markdown",
        }  # fmt: skip
        for rel, ps in points.items():
            keys = {
                ".ipynb": {"cell", "end_cell", "cell_start_line", "cell_end_line", "language"},
                ".html": {"file_start_line", "file_end_line"},
                ".pdf": {"page", "end_page"},
            }.get(Path(rel).suffix, set())
            assert all(keys <= set(p) for p in ps), rel
        assert not any("zqoutput" in t for t in embedder.texts)  # outputs left out
        assert not any("Made with" in t for t in embedder.texts)  # the theme's footer

        # notebooks: a markdown cell's words, a new code cell, an output only
        nb_path = root / "notebooks" / "reactivity.ipynb"
        nb = nbformat.read(nb_path, as_version=4)
        md = next(c for c in nb.cells if c.cell_type == "markdown" and "superpowers" in c.source)
        md.source = md.source.replace("superpowers", "remarkable powers")
        code = next(c for c in nb.cells if c.cell_type == "code")
        code.outputs[0]["text"] = "zqoutput changed\n"
        nb.cells.insert(3, nbformat.v4.new_code_cell("print('a new cell zqnewcell')"))
        nbformat.write(nb, nb_path)
        # HTML: a paragraph of the article, and the navigation only
        page = root / "site" / "guide" / "layout" / "index.html"
        text = page.read_text(encoding="utf-8")
        article = text.index("<article")
        para = text.index("<p>", article)
        page.write_text(text[: para + 3] + "Zqlayout words come first. " + text[para + 3 :])
        _replace(root / "site" / "FAQ" / "index.html", "Made with", "Built with")
        # PDF: the chapter made again from an edited text
        chapter = tmp_path / "chapter.md"
        book = CORPORA / "history" / "base"
        source = (book / PDF_PAGES[1]).read_text(encoding="utf-8")
        chapter.write_text(source.replace("UTF-8", "UTF-8 (zqpdf edit)", 1), encoding="utf-8")
        write_pdf(chapter, root / "pdf" / (Path(PDF_PAGES[1]).stem + ".pdf"))
        # AsciiDoc: a paragraph, and a new section
        adoc = root / "adoc" / "quickstart.adoc"
        adoc.write_text(
            adoc.read_text(encoding="utf-8").replace("Sphinx", "Zqsphinx", 1)
            + "\n== A new section\n\nZqadoc words of the new section.\n",
            encoding="utf-8",
        )
        # a rename, a delete, a new page, a broken PDF made good
        (root / "notebooks" / "workers.ipynb").rename(root / "notebooks" / "moved.ipynb")
        (root / "pdf" / (Path(PDF_PAGES[2]).stem + ".pdf")).unlink()
        shutil.copytree(root / "site" / "FAQ", root / "site" / "FAQ2")
        write_pdf(book / PDF_PAGES[2], root / "pdf" / "bad" / "truncated.pdf")
        before = len(embedder.texts)
        eng.sync(name)
        new = embedder.texts[before:]
        for word in ("remarkable powers", "zqnewcell", "Zqlayout", "zqpdf", "Zqadoc"):
            assert any(word in t for t in new), word
        assert len(new) < 60, f"re-embedded {len(new)} chunks for a handful of edits"
        assert set(dict(eng.resources.manifest.failed(name))) == set(BAD) - {
            "pdf/bad/truncated.pdf"
        }
        assert eng.verify(name).clean
    finally:
        eng.close()
    assert_matches_oracle(root, state, tmp_path, fake_vectors if model == "fake" else embedder)


def test_read_widens_a_hit_with_the_extracted_text_and_its_citation(
    tmp_path: Path, format_tree: Path, fake_embedder: CountingEmbedder
) -> None:
    from ingestd.daemon.commands.query.read import read

    root = tmp_path / "docs"
    for sub in ("notebooks", "pdf", "adoc"):
        shutil.copytree(format_tree / sub, root / sub, ignore=shutil.ignore_patterns("bad"))
    shutil.copytree(format_tree / "site" / "guide", root / "site" / "guide")
    state = tmp_path / "state"
    eng = make_engine(root, state, fake_embedder)
    (name,) = eng.context.sources
    try:
        eng.sync(name)
        points = dict(eng.resources.store.scroll("ingestd"))
        seen = set()
        for pid, p in sorted(points.items(), key=lambda kv: (kv[1]["path"], kv[1]["ordinal"])):
            suffix = Path(p["path"]).suffix
            if suffix in seen or p["ordinal"] < 3:
                continue
            seen.add(suffix)
            got = read(eng, id=pid, context=1)
            assert got["hit"]["text"] == p["text"]
            assert p["text"] in got["lines"]["text"]  # the text the chunker read, not the bytes
            for key in ("page", "cell", "file_start_line"):
                if key in p:
                    assert got["hit"][key] == p[key]
                    assert key in got["lines"]
            if suffix == ".pdf":
                assert got["lines"]["page"] <= p["page"] <= got["lines"]["end_page"]
                assert "%PDF" not in got["lines"]["text"]
            a, b = p["start_line"], p["end_line"]
            by_path = read(eng, path=p["path"], start_line=a, end_line=b)
            first = got["lines"]["start_line"]
            shown = got["lines"]["text"].split("\n")[a - first : b - first + 1]
            assert by_path["lines"]["text"] == "\n".join(shown)
            assert pid in [c["id"] for c in by_path["chunks"]]
        assert seen == {".ipynb", ".pdf", ".adoc", ".html"}
    finally:
        eng.close()


@pytest.mark.slow
@pytest.mark.timeout(1800)  # six CLI searches, each a process loading the model
def test_search_cites_pages_cells_and_html_lines(
    tmp_path: Path, format_tree: Path, real_embedder: CountingEmbedder
) -> None:
    from ingestd.daemon.mcpserver.models import HitOut, SearchOut, search_text

    root = tmp_path / "docs"
    (root / "pdf").mkdir(parents=True)
    shutil.copy(format_tree / "pdf" / "ch04-01-what-is-ownership.pdf", root / "pdf")
    shutil.copytree(format_tree / "notebooks", root / "notebooks")
    shutil.copytree(format_tree / "site" / "widgets", root / "site" / "widgets")
    state = tmp_path / "state"
    eng = make_engine(root, state, real_embedder)
    (name,) = eng.context.sources
    try:
        eng.sync(name)
    finally:
        eng.close()
    queries = {
        "pdf": "what happens to the heap memory when a String variable goes out of scope",
        "ipynb": "how do I make a widget attribute refresh automatically when it changes",
        "html": "which DataTable reactive controls whether zebra stripes are shown",
    }
    for suffix, query in queries.items():
        args = ["search", query, "--state-dir", str(state), "-k", "3"]
        hits = json.loads(run_cli(*args, "--json", check=True, timeout=420).stdout)
        top = hits[0]
        assert top["path"].endswith("." + suffix), (query, [h["path"] for h in hits])
        shown = run_cli(*args, check=True, timeout=420).stdout
        first = shown.splitlines()[0]
        if suffix == "pdf":
            assert f" p. {top['page']}" in first or f" pp. {top['page']}-" in first, first
        elif suffix == "ipynb":
            assert f" cell {top['cell']}:" in first or f" cells {top['cell']}:" in first, first
        else:
            assert f":{top['file_start_line']}-{top['file_end_line']}" in first, first
        out = SearchOut(
            query=query,
            mode="hybrid",
            hits=[HitOut.model_validate({**top, "heading_path": top.get("heading_path") or []})],
        )
        assert first.split("  ", 1)[1].split()[0].split(":")[0] in search_text(out)
