"""Fixtures of the fault suite: small trees with the damaged entries each test needs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import copy_tree

#: Two small real pages: enough neighbours for a fault to harm.
PAGES = ("docs/concepts/glossary.md", "docs/collector/deploy/gateway.md")

BAD_FILE = b"bad\xff.md"  # not UTF-8: Python names it 'bad\udcff.md'
BAD_DIR = b"dir\xfe"


def write_bytes_name(root: Path, name: bytes, data: bytes) -> Path:
    """Create ``root / name`` where ``name`` may be any bytes; returns the path."""
    path = os.fsencode(root) + b"/" + name
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return Path(os.fsdecode(path))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A writable tree of two real pages and one small page of our own."""
    root = copy_tree(tmp_path / "docs", PAGES)
    (root / "good.md").write_text("# Good\n\nA neighbour that must be indexed.\n")
    return root
