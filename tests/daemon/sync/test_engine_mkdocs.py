"""The invariant with the default rules on MkDocs and mdBook pages.

Admonitions, content tabs and snippet includes render to an embedded text that differs
from the verbatim one: an edit of an include's path changes the stored ``text`` but not
the embedded text (so neither the chunk hash nor the point id), an edit of an
admonition's title or of a tab's content changes both. After each kind of edit the
store must equal a from-scratch ingest of the final tree (ids, payload, sparse vectors),
and what the rendering leaves out is never embedded.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import (
    CORPORA,
    CountingEmbedder,
    assert_matches_oracle,
    copy_tree,
    fake_vectors,
    make_engine,
    store_snapshot,
)

FILES = [
    "mkdocs-docs/guide/actions.md",  # admonitions, included listings, an excalidraw snippet
    "mkdocs-docs/widgets/sparkline.md",  # content tabs with annotated code, mkdocstrings
    "mkdocs-docs/widgets/text_area.md",  # tabs of install commands
    "history/base/src/ch04-01-what-is-ownership.md",  # mdBook listings
]


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_mkdocs_markup_edits_match_oracle(tmp_path: Path, fake_embedder: CountingEmbedder) -> None:
    root = copy_tree(tmp_path / "docs", FILES, CORPORA)
    state = tmp_path / "state"
    eng = make_engine(root, state, fake_embedder)
    (name,) = eng.context.sources
    eng.sync(name)
    first = len(fake_embedder.texts)
    assert not any("8<" in t or "{{#" in t for t in fake_embedder.texts)

    # an include's path: the stored text changes, the embedded text does not
    _replace(
        root / FILES[0],
        '--8<-- "docs/examples/guide/actions/actions01.py"',
        '--8<-- "docs/examples/guide/actions/renamed01.py"',
    )
    _replace(
        root / FILES[3],
        "listing-04-01/src/main.rs:here}}",
        "listing-04-01/src/renamed.rs:here}}",
    )
    # an admonition gains a title; a tab gains a sentence
    _replace(
        root / FILES[1],
        "!!! tip\n\n    The sparkline data",
        '!!! tip "How the data is split"\n\n    The sparkline data',
    )
    _replace(
        root / FILES[2],
        '=== "poetry"\n\n',
        '=== "poetry"\n\n    Poetry users add the extra like this.\n\n',
    )
    eng.sync(name)
    new_texts = fake_embedder.texts[first:]
    assert any("How the data is split" in t for t in new_texts)
    assert any("Poetry users add the extra" in t for t in new_texts)
    assert not any("renamed" in t for t in new_texts)
    assert len(new_texts) <= 6, f"re-embedded {len(new_texts)} chunks for four small edits"
    assert eng.verify(name).clean
    eng.close()
    stored = [p["text"] for p in store_snapshot(state).values()]
    assert any("renamed01.py" in t for t in stored) and any("renamed.rs" in t for t in stored)
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
