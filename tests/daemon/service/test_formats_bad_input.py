"""Bad files of every format dropped into a tree `ingestd run` watches, with the real model.

A malformed notebook, a PDF cut short, an encrypted one, one of images only (no text
layer), a page-count bomb (a million pages in a few KB), a 500 MB HTML file (sparse on
disk: over ``files.max_bytes``, it is never read) and an HTML page nested 3,000
elements deep arrive while the daemon watches. Each bad one becomes a failed document
whose note in ``status`` says why; the deep page is indexed; the daemon keeps
serving searches and indexing new files, a fixed notebook leaves the failed list,
``verify`` is clean, the store equals a from-scratch ingest, and SIGTERM ends it
cleanly with no traceback in its log.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.format_inputs import pdf_bomb
from tests.helpers import assert_matches_oracle, fake_vectors, ingestd_cmd, run_cli, wait_for

pytestmark = pytest.mark.slow

#: path -> words of its note in ``status``.
BAD = {
    "nb/broken.ipynb": "not a readable Jupyter notebook",
    "pdf/truncated.pdf": "not a readable PDF",
    "pdf/encrypted.pdf": "encrypted PDF (it needs a password); skipped",
    "pdf/scanned.pdf": "PDF has no text layer",
    "pdf/bomb.pdf": "PDF has 1000000 pages (> the rule's max_pages 2000); skipped",
    "site/huge.html": "file too large (524288000 bytes > files.max_bytes",
}


def _status(state: Path) -> dict[str, Any]:
    proc = run_cli("status", "--state-dir", str(state), "--json", timeout=60)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def _failed(state: Path) -> dict[str, str]:
    (src,) = _status(state)["sources"]
    return {f["path"]: f["error"] for f in src.get("failed_documents") or []}


def _search(state: Path, query: str) -> list[dict[str, Any]]:
    proc = run_cli("search", "--state-dir", str(state), "--json", "-k", "5", query, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_bad_files_of_every_format_never_stop_the_daemon(tmp_path: Path, format_tree: Path) -> None:
    root = tmp_path / "docs"
    (root / "nb").mkdir(parents=True)
    shutil.copy(format_tree / "notebooks" / "actions.ipynb", root / "nb")
    (root / "pdf").mkdir()
    shutil.copy(format_tree / "pdf" / "ch08-02-strings.pdf", root / "pdf")
    shutil.copytree(format_tree / "md", root / "md")
    state = tmp_path / "state"
    log = (tmp_path / "daemon.log").open("w")
    proc = subprocess.Popen(
        [*ingestd_cmd(), "run", "--state-dir", str(state), str(root)],
        stdout=log,
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
        assert _failed(state) == {}

        # the bad files arrive while the daemon watches
        good_nb = (format_tree / "notebooks" / "workers.ipynb").read_bytes()
        (root / "nb" / "broken.ipynb").write_bytes(good_nb[: len(good_nb) // 2])
        bad = format_tree / "pdf" / "bad"
        for name in ("truncated.pdf", "encrypted.pdf", "scanned.pdf"):
            shutil.copy(bad / name, root / "pdf" / name)
        (root / "pdf" / "bomb.pdf").write_bytes(pdf_bomb())
        (root / "site").mkdir()
        with (root / "site" / "huge.html").open("wb") as f:
            f.write(b"<html><body><main><p>zqhuge</p>")
            f.truncate(500 * 1024 * 1024)  # sparse: 500 MB to stat, nothing on disk
        depth = 3000
        deep = "<main>" + "<div>" * depth + "<p>Zqdeep words at the bottom of the page.</p>"
        (root / "site" / "deep.html").write_text(deep + "</div>" * depth + "</main>")

        failed = wait_for(
            lambda: (lambda f: f if set(f) == set(BAD) else None)(_failed(state)),
            240,
            "every bad file in status",
            interval=0.5,
        )
        for rel, words in BAD.items():
            assert words in failed[rel], (rel, failed[rel])
        st = _status(state)
        assert st["daemon"]["healthy"] is True
        deep_hits = _search(state, "Zqdeep words at the bottom")
        assert deep_hits[0]["path"] == "site/deep.html"
        assert "Zqdeep" in deep_hits[0]["text"]

        # the daemon goes on: a new notebook is indexed, a fixed one leaves the failed list
        (root / "nb" / "broken.ipynb").write_bytes(good_nb)
        nb = nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_markdown_cell("# Zqferry timetable\n\nThe zqferry leaves at dawn."),
                nbformat.v4.new_code_cell("print('zqferry')"),
            ]
        )
        nbformat.write(nb, root / "nb" / "ferry.ipynb")
        wait_for(
            lambda: any(h["path"] == "nb/ferry.ipynb" for h in _search(state, "zqferry timetable")),
            60,
            "the new notebook in search",
        )
        wait_for(
            lambda: set(_failed(state)) == set(BAD) - {"nb/broken.ipynb"},
            60,
            "the fixed notebook to leave the failed list",
        )
        hits = _search(state, "which decorator runs a method in a thread worker")
        assert any(h["path"] == "nb/broken.ipynb" and "cell" in h for h in hits), hits

        verify = run_cli("verify", "--state-dir", str(state), "--json", timeout=300)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert json.loads(verify.stdout)["clean"] is True
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    logtext = (tmp_path / "daemon.log").read_text()
    assert "Traceback" not in logtext, logtext
    for rel in BAD:
        assert rel in logtext  # each skip logged, one line
    assert_matches_oracle(root, state, tmp_path, fake_vectors)
