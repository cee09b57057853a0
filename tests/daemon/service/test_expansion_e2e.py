"""Files that would multiply, dropped into a tree `ingestd run` watches, with the real model.

Two AsciiDoc files of issue 41 (20,027 bytes that made 14,650 chunks and 1.1 GB, 3,906
bytes that made 396 points), an HTML table padded to a wide row, a PDF whose stream
inflates and one that draws a form 4,000 times arrive at once with a new markdown
page. The page is searchable after the daemon embedded exactly its one chunk (not one
chunk of the bombs), each bomb is a failed document whose one line in ``status`` says
it expands past its bound, the daemon stays healthy, ``verify`` is clean, and the
store equals a from-scratch ingest.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import expansion_inputs as bombs
from tests.helpers import (
    assert_matches_oracle,
    copy_tree,
    fake_vectors,
    ingestd_cmd,
    run_cli,
    wait_for,
)

pytestmark = pytest.mark.slow

BOMBS = {
    "adoc/big.adoc": bombs.adoc_attribute_bomb,
    "adoc/sentence.adoc": bombs.adoc_sentence_bomb,
    "site/table.html": bombs.html_wide_table,
    "pdf/inflate.pdf": bombs.pdf_inflating_stream,
    "pdf/forms.pdf": bombs.pdf_form_drawn,
}


def _status(state: Path) -> dict[str, Any]:
    proc = run_cli("status", "--state-dir", str(state), "--json", timeout=60)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def _failed(st: dict[str, Any]) -> dict[str, str]:
    (src,) = st["sources"]
    return {f["path"]: f["error"] for f in src.get("failed_documents") or []}


def test_files_that_would_multiply_are_skipped_and_hold_no_edit_back(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "docs", ("docs/concepts/glossary.md",))
    state = tmp_path / "state"
    log = tmp_path / "daemon.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*ingestd_cmd(), "run", "--state-dir", str(state), str(root)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: (
                (state / "control-socket").exists()
                and (_status(state).get("daemon") or {}).get("phase") == "watching"
            ),
            300,
            "the first reconcile",
        )
        before = _status(state)["embedded_since_start"]
        for rel, make in BOMBS.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(make())
        (root / "ferry.md").write_text("# Zqferry timetable\n\nThe zqferry leaves at dawn.\n")
        wait_for(
            lambda: set(_failed(_status(state))) == set(BOMBS),
            180,
            "every bomb in status",
            interval=0.5,
        )
        hits = json.loads(
            run_cli("search", "--state-dir", str(state), "--json", "zqferry timetable").stdout
        )
        assert hits and hits[0]["path"] == "ferry.md"
        st = _status(state)
        assert st["daemon"]["healthy"] is True, st["daemon"]["problems"]
        assert st["embedded_since_start"] - before == 1  # the page's one chunk, no bomb's
        for error in _failed(st).values():
            assert error.startswith("expands to over ") and error.endswith("; skipped"), error
        text = run_cli("status", "--state-dir", str(state)).stdout
        assert sum("expands to over" in line for line in text.splitlines()) == len(BOMBS)
        verify = run_cli("verify", "--state-dir", str(state), "--json", timeout=300)
        assert verify.returncode == 0 and json.loads(verify.stdout)["clean"] is True
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logtext = log.read_text()
    assert "Traceback" not in logtext, logtext
    for rel in BOMBS:
        assert sum(rel in line and "expands" in line for line in logtext.splitlines()) == 1
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
