"""A one-sentence edit in a long page re-embeds only the few chunks it changed.

End to end through the sync engine with the real bundled model: a long real markdown
page (docs/languages/java/api.md of md-docs, 109 chunks, much of it code) is indexed,
one sentence is added to a paragraph in its middle, and the next sync embeds only the
chunk texts the page did not have before: the edited chunk's alone, the packing after
it being back in step at once (docs/benchmarks.md, "Edit locality"), while the store
equals a from-scratch ingest (``verify``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import CountingEmbedder, copy_tree, make_engine, store_snapshot

PAGE = "docs/languages/java/api.md"
EDIT = "Edited: a new sentence is added to this paragraph. "


def _sync(root: Path, state: Path, embed: Any) -> Any:
    eng = make_engine(root, state, embed)
    try:
        name = next(iter(eng.context.sources))
        res = eng.sync(name)
        assert eng.verify(name).clean
        return res
    finally:
        eng.close()


def _texts(state: Path) -> set[str]:
    return {str(p["chunk_hash"]) for p in store_snapshot(state, sparse=False).values()}


def test_a_one_sentence_edit_embeds_only_the_chunks_it_changed(
    tmp_path: Path, real_embedder: CountingEmbedder
) -> None:
    root = copy_tree(tmp_path / "docs", [PAGE])
    state = tmp_path / "state"
    first = _sync(root, state, real_embedder)
    before = _texts(state)
    assert first.embedded == len(before) >= 80  # a long page
    page = root / PAGE
    text = page.read_text(encoding="utf-8")
    at = text.index("\n\n", len(text) // 2) + 2  # a paragraph in the middle of the page
    while not text[at].isalpha():
        at = text.index("\n\n", at) + 2
    page.write_text(text[:at] + EDIT + text[at:], encoding="utf-8")
    real_embedder.texts.clear()
    second = _sync(root, state, real_embedder)
    new = _texts(state) - before
    assert second.indexed == 1
    assert second.embedded == len(new) == len(real_embedder.texts) == 1
    assert any(EDIT.strip() in t for t in real_embedder.texts)
