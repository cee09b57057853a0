"""Real MDX pages through the sync engine: the ``mdx`` rule, the invariant, edits, search.

Six pages of the AI SDK's MDX documentation (``ai@7.0.173``, :mod:`tests.mdx_tree`) are
ingested with the default rules, then edited as MDX pages change: an ``import`` line
added above the front matter's page, a description inside a component's data, a tag's
prose attribute. After each sync the store equals a from-scratch ingest. An ESM line
changes a chunk's verbatim ``text`` but not what is embedded, so it embeds nothing; the
other two embed only the chunk they touch. With the bundled model, a question answered
only inside a ``<PropertiesTable content={[...]} />`` finds that page first.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import CountingEmbedder, assert_matches_oracle, fake_vectors, make_engine

PAGES = (
    "02-foundations/05-streaming.mdx",
    "03-ai-sdk-core/25-settings.mdx",
    "05-ai-sdk-rsc/02-streaming-react-components.mdx",
    "07-reference/01-ai-sdk-core/06-embed-many.mdx",
    "07-reference/01-ai-sdk-core/80-smooth-stream.mdx",
    "09-troubleshooting/06-timeout-on-vercel.mdx",
)


def _tree(mdx_tree: Path, root: Path) -> Path:
    for rel in PAGES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(mdx_tree / rel, root / rel)
    return root


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "model", ["fake", pytest.param("real", marks=pytest.mark.slow)], ids=["fake", "real-model"]
)
def test_mdx_pages_match_the_oracle_and_an_import_line_embeds_nothing(
    tmp_path: Path, mdx_tree: Path, model: str, request: pytest.FixtureRequest
) -> None:
    embedder: CountingEmbedder = request.getfixturevalue(f"{model}_embedder")
    root = _tree(mdx_tree, tmp_path / "docs")
    state = tmp_path / "state"
    eng = make_engine(root, state, embedder)
    (name,) = eng.context.sources
    try:
        eng.sync(name)
        points = [p for _, p in eng.resources.store.scroll("ingestd")]
        assert {p["rule"] for p in points} == {"mdx"}
        assert not any("PropertiesTable" in t or "<Note" in t for t in embedder.texts)
        assert any(t.startswith("Settings > ") for t in embedder.texts)  # the title roots them

        page = root / "05-ai-sdk-rsc" / "02-streaming-react-components.mdx"
        _edit(
            page,
            "\nimport { UIPreviewCard",
            "\nimport { Extra } from '@/components/extra';\nimport { UIPreviewCard",
        )
        before = len(embedder.texts)
        eng.sync(name)
        assert embedder.texts[before:] == []  # the ESM is in the payload's text only
        first = min(
            (p for _, p in eng.resources.store.scroll("ingestd") if p["path"].endswith(page.name)),
            key=lambda p: p["ordinal"],
        )
        assert "import { Extra } from '@/components/extra';" in first["text"]

        ref = root / "07-reference" / "01-ai-sdk-core" / "06-embed-many.mdx"
        _edit(
            ref,
            "'Maximum number of concurrent requests",
            "'Zqparallel maximum number of concurrent requests",
        )
        _edit(
            root / "02-foundations" / "05-streaming.mdx",
            'title="Blocking UI"',
            'title="Zqblocking UI"',
        )
        before = len(embedder.texts)
        eng.sync(name)
        new = embedder.texts[before:]
        assert any("Zqparallel" in t for t in new) and any("Zqblocking UI" in t for t in new)
        assert len(new) <= 4, new
        assert eng.verify(name).clean
    finally:
        eng.close()
    assert_matches_oracle(root, state, tmp_path, fake_vectors if model == "fake" else embedder)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_question_answered_inside_component_data_finds_its_page(
    tmp_path: Path, mdx_tree: Path, real_embedder: CountingEmbedder
) -> None:
    from ingestd.daemon.commands.query.search import search

    root = _tree(mdx_tree, tmp_path / "docs")
    eng = make_engine(root, tmp_path / "state", real_embedder)
    (name,) = eng.context.sources
    try:
        eng.sync(name)
        query = "What delay in milliseconds does smoothStream wait between chunks by default?"
        for mode in ("hybrid", "dense"):
            hits = search(eng, query, k=3, mode=mode)
            assert hits[0]["path"].endswith("80-smooth-stream.mdx"), [h["path"] for h in hits]
            holder = [h for h in hits if "Defaults to 10ms" in h["text"]]
            assert holder, [h["text"][:80] for h in hits]
            assert holder[0]["heading_path"][0] == "smoothStream"  # the front matter's title
    finally:
        eng.close()
