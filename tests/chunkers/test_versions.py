"""A chunker whose output changes must change its ``version``.

A document is re-chunked when its rule's fingerprint changes, and the fingerprint
holds the chunker's name and ``version`` (``daemon/sync/preparing/rules.py``). A change of a
chunker's output under the same version would leave every existing store with chunks
that ``verify`` (which re-chunks) calls wrong, until each file happens to change. This
test records a digest of each chunker's output, with its defaults, on real documents of
every kind the corpora hold, beside the version that made it. When the output changes:
bump the chunker's ``version`` and record again::

    INGESTD_RECORD_CHUNKER_OUTPUTS=1 python -m pytest tests/chunkers/test_versions.py
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest

from ingestd.chunkers import ChunkContext
from ingestd.chunkers.registry import CHUNKERS, make_chunker
from tests.chunkers.conftest import CORPORA
from tests.mdx_tree import mdx_docs

RECORD = Path(__file__).with_name("chunker_outputs.json")

#: Real documents of each kind the default rules meet: Markdown (a glossary, an mdBook
#: chapter, MkDocs Material with admonitions, tabs and snippet includes),
#: reStructuredText, and Python source.
SAMPLES = (
    "md-docs/docs/concepts/glossary.md",
    "history/base/src/ch19-01-unsafe-rust.md",
    "mkdocs-docs/css_types/color.md",
    "mkdocs-docs/blog/posts/inline-mode.md",
    "mkdocs-docs/css_types/index.md",
    "rst-docs/glossary.rst",
    "rst-docs/support.rst",
    "code/sphinx/config.py",
)
#: Real MDX pages (the AI SDK's, tests/mdx_tree.py), chunked by ``mdx`` besides the
#: samples above: JSX components with prose props and data props, top-level ESM imports.
MDX_SAMPLES = (
    "02-foundations/05-streaming.mdx",
    "05-ai-sdk-rsc/02-streaming-react-components.mdx",
    "07-reference/01-ai-sdk-core/80-smooth-stream.mdx",
)


def digest(name: str, ctx: ChunkContext) -> str:
    """sha256 hex of every field of every chunk strategy ``name`` makes of :data:`SAMPLES`.

    ``mdx`` also chunks :data:`MDX_SAMPLES`.
    """
    chunker = make_chunker(name, {}, ctx)
    h = hashlib.sha256()
    paths = [CORPORA / rel for rel in SAMPLES]
    if name == "mdx":
        paths += [mdx_docs() / rel for rel in MDX_SAMPLES]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for chunk in chunker.chunk(text):
            record = dataclasses.asdict(chunk)
            h.update(json.dumps(record, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


def test_the_samples_exist() -> None:
    missing = [rel for rel in SAMPLES if not (CORPORA / rel).is_file()]
    assert not missing, f"samples missing from the corpora: {missing}"


@pytest.mark.parametrize("name", sorted(CHUNKERS))
def test_a_changed_output_comes_with_a_new_version(name: str, ctx: ChunkContext) -> None:
    recorded = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    version, got = CHUNKERS[name].version, digest(name, ctx)
    if os.environ.get("INGESTD_RECORD_CHUNKER_OUTPUTS"):
        recorded[name] = {"version": version, "sha256": got}
        RECORD.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
        return
    assert name in recorded, f"no recorded output for {name!r}: record it (module docstring)"
    was = recorded[name]
    if was["version"] == version:
        assert was["sha256"] == got, (
            f"chunker {name!r} makes other chunks than version {version} did: bump its "
            "`version` (existing stores re-chunk on it) and record again (module docstring)"
        )
    else:
        pytest.fail(
            f"chunker {name!r} is version {version}, recorded {was['version']}: "
            "record its output again (module docstring)"
        )
