"""Query and document prompts through the engine: an index without them embeds nothing
again, a prompt set embeds every chunk again with it, a search embeds its query with its own.

The fake embedder counts the texts the model gets; the real model's vectors of prompted
texts are pinned in ``tests/store/embedding/test_prompts.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ingestd.daemon.commands.query.search import search as search_cmd
from ingestd.daemon.sync.profiles.profile import differences
from tests.helpers import CountingEmbedder, copy_tree, fake_vectors, make_engine


def _sync(root: Path, state: Path, embed: Any, **embedding: Any) -> Any:
    eng = make_engine(root, state, embed, **({"embedding": embedding} if embedding else {}))
    name = next(iter(eng.context.sources))
    res = eng.sync(name)
    assert not res.interrupted and eng.verify(name).clean
    return eng, res


def test_prompts_off_embed_nothing_again_and_a_prompt_set_embeds_with_it(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    first = CountingEmbedder(fake_vectors)
    eng, res = _sync(root, state, first)
    before = eng.profiles.profile.model.fingerprint
    eng.close()
    assert res.embedded == len(first.texts) > 0

    again = CountingEmbedder(fake_vectors)
    eng, res = _sync(root, state, again, query_prompt="", document_prompt="")
    assert eng.profiles.profile.model.fingerprint == before
    assert again.texts == [] and res.embedded == 0  # nothing embedded again
    eng.close()

    prompted = CountingEmbedder(fake_vectors)
    eng, res = _sync(root, state, prompted, query_prompt="query: ", document_prompt="passage: ")
    try:
        assert eng.profiles.profile.model.fingerprint != before
        assert sorted(prompted.texts) == sorted("passage: " + t for t in first.texts)
        n = len(prompted.texts)
        assert search_cmd(eng, "how are traces sampled", k=3, mode="dense")
        assert prompted.texts[n:] == ["query: how are traces sampled"]
    finally:
        eng.close()


def test_a_changed_prompt_is_named_among_a_migrations_differences() -> None:
    base = {"model": "m", "model_fingerprint": "a", "tokenizer": "cl100k_base", "fit_model": True}
    old = {**base, "embedding": {"model": "m"}}
    new = {**base, "model_fingerprint": "b", "embedding": {"document_prompt": "passage: "}}
    lines = differences(old, new)
    assert lines[1:] == ["embedding.document_prompt: '' -> 'passage: '"]
