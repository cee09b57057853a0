"""A small indexed tree for the ui's tests: prose, a secret-bearing name, left-out files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

#: The tree: path -> text. ``.env`` is included on purpose, to be refused as a secret.
TREE = {
    "install.md": (
        "# Install\n\nRun pip install ingestd to install the daemon.\n\n"
        "## Exporter\n\nThe exporter sends metrics every ten seconds.\n"
    ),
    "guide/animals.md": "# Animals\n\nAxolotls live in the lakes near Mexico City.\n",
    "guide/ships.md": "# Ships\n\nA clipper is a fast sailing ship of the nineteenth century.\n",
    ".env": "API_KEY=not-a-real-key\n",
    "debug.log": "a log line\n",
    "notes.txt": "plain notes\n",
    "build/out.md": "# Built\n\ngenerated page\n",
    ".gitignore": "build/\n",
}


def write_config(base: Path, root: Path, **extra: Any) -> Path:
    """The config of source ``docs`` at ``root``: markdown and ``.env``, logs excluded."""
    config = base / "config.yaml"
    source = {"name": "docs", "root": str(root), "include": ["*.md", ".env", "*.log"]}
    source["exclude"] = ["*.log"]
    config.write_text(json.dumps({"sources": [source], **extra}))
    return config


def write_tree(root: Path) -> Path:
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, real_model: Any) -> Path:
    """:data:`TREE` indexed with the real model as source ``docs`` (``base/{docs,state}``)."""
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    base = tmp_path_factory.mktemp("ui")
    root = write_tree(base / "docs")
    eng = Engine(load_config(write_config(base, root)), base / "state", embed_model=real_model)
    try:
        eng.sync("docs")
    finally:
        eng.close()
    return base
