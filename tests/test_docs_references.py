"""Pointers into the README name sections it has (sections that moved into the site left
pointers such as ``see "Changing the embedding model" in the README`` behind)."""

from __future__ import annotations

import re
import subprocess

from tests.helpers import REPO

#: ``"Title" in the README`` and ``README "Title"``, the two ways files point at a section.
POINTER = re.compile(r'"([^"\n]+)" in the README|README "([^"\n]+)"')


def test_every_pointer_to_a_readme_section_names_a_heading_of_the_readme() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    headings = {line.lstrip("#").strip() for line in readme.splitlines() if line.startswith("#")}
    files = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.toml", "*.yaml", "*.yml", "*.service", "*.timer"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    stale = [
        f"{rel}: {title}"
        for rel in files
        if rel != "tests/test_docs_references.py"
        for m in POINTER.finditer((REPO / rel).read_text(encoding="utf-8", errors="replace"))
        if (title := m.group(1) or m.group(2)) not in headings
    ]
    assert len(files) > 100 and not stale, stale
