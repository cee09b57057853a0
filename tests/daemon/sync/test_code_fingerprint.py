"""The chunkers' code fingerprint covers every module that decides chunk text."""

from __future__ import annotations

import shutil
from pathlib import Path

import ingestd.chunkers as pkg
from ingestd.daemon.sync.preparing.rules import chunkers_code_fingerprint, source_tree_fingerprint

PACKAGE = Path(pkg.__file__).parent


def test_installed_fingerprint_is_the_package_folders() -> None:
    assert chunkers_code_fingerprint() == source_tree_fingerprint(PACKAGE)


def test_an_edit_in_any_subpackage_changes_the_fingerprint(tmp_path: Path) -> None:
    """A change to a reader, a strategy or the packer re-chunks, as a top-level one does."""
    copy = tmp_path / "chunkers"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = source_tree_fingerprint(copy)
    modules = sorted(p for p in copy.rglob("*.py") if p.parent != copy)
    assert {p.parent.name for p in modules} >= {"readers", "strategies", "packing", "sizing"}
    for module in modules:
        original = module.read_bytes()
        module.write_bytes(original + b"\n# changed\n")
        assert source_tree_fingerprint(copy) != before, module.relative_to(copy)
        module.write_bytes(original)
    assert source_tree_fingerprint(copy) == before


def test_a_moved_module_changes_the_fingerprint(tmp_path: Path) -> None:
    copy = tmp_path / "chunkers"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = source_tree_fingerprint(copy)
    (copy / "readers" / "moved_here.py").write_bytes((copy / "sizing" / "__init__.py").read_bytes())
    (copy / "sizing" / "__init__.py").unlink()
    assert source_tree_fingerprint(copy) != before
