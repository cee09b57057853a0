"""A file a reader would multiply is a failed document with one line, never a traceback.

The bound itself is tested per format in ``tests/chunkers/readers/test_expansion.py``;
here the file policy: no chunks, no ids, one line for ``status`` (issue 41, item 2).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ingestd.daemon.config import load_config
from ingestd.daemon.sources.local import LocalFolder
from ingestd.daemon.sync.preparing.documents import prepare_document
from ingestd.daemon.sync.preparing.rules import RuleSet, build_context
from tests import expansion_inputs as bombs


def test_a_bomb_is_a_failed_document_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    files = {
        "big.adoc": bombs.adoc_attribute_bomb(),
        "sentence.adoc": bombs.adoc_sentence_bomb(),
        "table.html": bombs.html_wide_table(),
        "inflate.pdf": bombs.pdf_inflating_stream(),
        "forms.pdf": bombs.pdf_form_drawn(),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    cfg = load_config(
        None,
        overrides={
            "state_dir": str(tmp_path / "state"),
            "sources": [{"name": "docs", "root": str(root)}],
        },
    )
    ctx, tok = build_context(cfg)
    rules = RuleSet(cfg.rules, ctx, tok, "model")
    src = LocalFolder(cfg.sources[0], tmp_path / "state")
    caplog.set_level(logging.DEBUG)
    for name in files:
        prep = prepare_document(src, name, rules.match(name), cfg.files)
        assert prep.chunks == [] and prep.ids == []
        assert prep.error is not None and prep.error.startswith("expands to over "), prep.error
        assert "\n" not in prep.error and prep.error.endswith("; skipped")
    assert not [r for r in caplog.records if r.exc_info], "no traceback for a bound"
