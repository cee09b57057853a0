"""Where the guides state ingestd's defaults (include globs, built-in rules), the code agrees.

A new user reads "it indexes `*.md` ... `*.txt`" before anything else: when a default
grows (notebooks, HTML, PDF and AsciiDoc joined the include globs), every page that
lists it must grow too. Each claim is found by the words that introduce it and
compared with :data:`~ingestd.daemon.config.DEFAULT_INCLUDE` and
:func:`~ingestd.daemon.config.default_rules`.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from ingestd.daemon.config import DEFAULT_INCLUDE, default_rules
from tests.helpers import REPO

DOCS = REPO / "docs"
GLOB = re.compile(r"`(\*\.[\w]+)`")


def _paragraph(rel: str, opening: str) -> str:
    """The paragraph of page ``rel`` (docs-relative, or the README) that holds ``opening``."""
    text = (REPO / rel if rel == "README.md" else DOCS / rel).read_text(encoding="utf-8")
    assert opening in text, f"{rel}: the claim that starts {opening!r} moved; update this test"
    start = text.rfind("\n\n", 0, text.index(opening)) + 2
    end = text.find("\n\n", start)
    return text[start : end if end >= 0 else None]


@pytest.mark.parametrize(
    ("rel", "opening"),
    [
        ("getting-started/quick-start.md", "`ingestd run .` watches the folder"),
        ("getting-started/your-folder.md", "With no config, ingestd indexes"),
        ("guides/formats.md", "The default include globs add"),
    ],
)
def test_every_guide_that_lists_the_default_include_globs_lists_them_all(
    rel: str, opening: str
) -> None:
    assert set(GLOB.findall(_paragraph(rel, opening))) == set(DEFAULT_INCLUDE)


def test_the_configuration_reference_gives_the_default_include_globs_in_order() -> None:
    row = _paragraph("reference/configuration.md", "| `include` |")
    (cell,) = re.findall(r"^\| `include` \| `(\[.*?\])` \|", row, re.M)
    assert tuple(json.loads(cell)) == DEFAULT_INCLUDE


def test_the_example_config_includes_the_default_globs() -> None:
    example = yaml.safe_load((REPO / "config.example.yaml").read_text(encoding="utf-8"))
    assert tuple(example["sources"][0]["include"]) == DEFAULT_INCLUDE


def test_the_configuration_guide_names_the_built_in_rules_in_order() -> None:
    para = _paragraph("guides/configuration.md", "replace the built-in ones")
    listed = re.search(r"built-in ones \(([^)]*)\)", para.replace("\n", " "))
    assert listed is not None
    names = re.findall(r"`(\w+)`", listed.group(1))
    rules = default_rules()
    assert names == [r.name for r in rules] + [rules[-1].chunker]


def test_the_chunking_guide_gives_each_built_in_rule_its_globs() -> None:
    para = _paragraph("guides/chunking.md", "the built-in ones apply").replace("\n", " ")
    claimed = {
        name: set(GLOB.findall(globs))
        for name, globs in re.findall(r"`(\w+)` for ((?:`\*\.\w+`(?:,? and |, )?)+)", para)
    }
    rules = default_rules()
    assert claimed == {r.name: set(r.match) for r in rules[:-1]}
    assert f"and `{rules[-1].chunker}` for the rest" in para


def test_the_formats_guide_shows_the_default_rules_as_they_are() -> None:
    text = (DOCS / "guides/formats.md").read_text(encoding="utf-8")
    block = text[text.index("## The default rules") :]
    block = block[block.index("```yaml") + 7 : block.index("```", block.index("```yaml") + 7)]
    shown = [(r["name"], tuple(r["match"]), r["chunker"]) for r in yaml.safe_load(block)["rules"]]
    assert shown == [(r.name, r.match, r.chunker) for r in default_rules()]


def test_the_site_mkdocs_builds_in_a_clone_is_not_indexed_by_the_quick_start(
    tmp_path: Path,
) -> None:
    """``mkdocs build`` in the clone the quick start watches writes HTML copies of every
    page: ``.gitignore`` leaves them out, as a scan of ``ingestd run .`` sees it."""
    from ingestd.daemon.config import SourceConfig
    from ingestd.daemon.sources.base import open_source

    site_dir = yaml.safe_load((REPO / "mkdocs.yml").read_text()).get("site_dir", "site")
    shutil.copy(REPO / ".gitignore", tmp_path / ".gitignore")
    for rel in ("docs/index.md", f"{site_dir}/index.html", f"{site_dir}/guides/formats/index.html"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("<h1>ingestd</h1>\n" if rel.endswith("html") else "# ingestd\n")
    found = open_source(SourceConfig(name="clone", root=tmp_path)).scan()
    assert sorted(found) == ["docs/index.md"]
