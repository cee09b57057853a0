"""Every answer shape cites its text: a PDF's pages, a notebook's cells, a version and commit.

A git repository with two tags holds a PDF (a Rust book chapter, made by fpdf2), a
notebook (a Textual guide page, made by nbformat) and a markdown page that changes
between the tags. A real ``ingestd run`` (the bundled model) indexes both versions;
then each shape asks it: ``ingestd search`` (hits and passages, ``--json`` and text),
``ingestd read`` (``--json`` and text), :class:`~ingestd.daemon.client.Client`'s
``search`` and ``read``, and the MCP tools ``search`` (passages by default, hits
without a budget) and ``read`` through the official SDK's stdio client. Each carries
the keys of :data:`~ingestd.store.search.citation.CITE_KEYS` its text has: a PDF
passage cites pages, not lines of the extracted text, and a search of one version
answers with that version and its commit. Last, with the daemon stopped, the state
dir answers the same.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.client import Client
from ingestd.store.search.citation import CITE_KEYS, span_cite
from tests.format_inputs import write_notebook, write_pdf
from tests.gitrepos import HISTORY, git
from tests.helpers import CORPORA, run_cli, start_ingestd_run, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PDF = "pdf/ownership.pdf"
NOTEBOOK = "nb/workers.ipynb"
PAGE = "guide.md"
PDF_QUESTION = "what are the ownership rules: each value in Rust has an owner"
NOTEBOOK_QUESTION = "how do I run a worker in a thread with the work decorator"
NEW_TEXT = "Version two adds the quokka scheduler, which runs workers on a calculator."
PAGE_KEYS = {"page", "end_page", "version", "commit"}
CELL_KEYS = {"cell", "end_cell", "cell_start_line", "cell_end_line", "version", "commit"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Book:
    """The repository: its bare origin (the source's url) and each tag's commit."""

    def __init__(self, where: Path) -> None:
        work, self.origin = where / "work", where / "origin.git"
        work.mkdir(parents=True)
        git(work, "init", "-q", "-b", "main")
        git(where, "init", "-q", "--bare", str(self.origin))
        write_pdf(HISTORY / "base/src/ch04-01-what-is-ownership.md", work / PDF)
        write_notebook(CORPORA / "mkdocs-docs/guide/workers.md", work / NOTEBOOK)
        (work / PAGE).write_text("# Guide\n\nThe scheduler runs workers one at a time.\n")
        self.commits: dict[str, str] = {}
        self._tag(work, "v1")
        (work / PAGE).write_text(f"# Guide\n\n{NEW_TEXT}\n")
        self._tag(work, "v2")
        git(work, "push", "-q", str(self.origin), "main", "--tags")

    def _tag(self, work: Path, name: str) -> None:
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", name)
        git(work, "tag", name)
        self.commits[name] = git(work, "rev-parse", "HEAD").strip()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Book, Path, subprocess.Popen[bytes]]]:
    """A real ``ingestd run`` on the repository's two tags: ``(book, state, process)``.

    Its config is ``ingestd.yaml`` beside the state dir.
    """
    book = Book(tmp_path / "repo")
    config = tmp_path / "ingestd.yaml"
    config.write_text(
        "sources:\n"
        f"  - {{kind: git, name: book, url: '{book.origin}', refs: ['v*'], poll_s: 3600}}\n"
    )
    state = tmp_path / "state"
    proc = start_ingestd_run(config, state, tmp_path / "daemon.log")
    try:

        def indexed() -> bool:
            st = run_cli("status", "--state-dir", str(state), "--json", timeout=120)
            status = json.loads(st.stdout or "{}")
            d, sources = status.get("daemon") or {}, status.get("sources") or [{}]
            return (
                d.get("phase") == "watching"
                and not d.get("queue_depth")
                and sources[0].get("documents") == 6
            )

        wait_for(indexed, 600, "both versions indexed by the daemon", interval=1.0)
        yield book, state, proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _cli(state: Path, *args: str) -> str:
    proc = run_cli(*args, "--state-dir", str(state), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _check_cites(book: Book, answers: list[dict[str, Any]], what: str) -> None:
    """PDF answers cite pages, notebook answers cells; each its version and its commit.

    A key the answer's schema declares but the text has not is ``null`` (MCP) or absent.
    """
    assert answers, what
    for a in answers:
        keys = {k for k in CITE_KEYS if a.get(k) is not None}
        if a["path"] == PDF:
            assert keys == PAGE_KEYS and 1 <= a["page"] <= a["end_page"], (what, a)
        elif a["path"] == NOTEBOOK:
            assert keys == CELL_KEYS and 1 <= a["cell"] <= a["end_cell"], (what, a)
        else:
            assert keys == {"version", "commit"}, (what, a)
        assert a["commit"] == book.commits[a["version"]], (what, a)


def _check_passages(answer: Any, what: str) -> None:
    """A passage cites from its first hit to its last (the hits it was made of)."""
    hits = {h["id"]: h for h in answer.hits}
    for p in answer.passages:
        made_of = [hits[i] for i in p["ids"]]
        first = min(made_of, key=lambda h: h["start_char"])
        last = max(made_of, key=lambda h: h["end_char"])
        want = span_cite(first, last)
        assert {k: p[k] for k in CITE_KEYS if k in p} == want, (what, p)


def _pdf_text_cite(text: str) -> None:
    assert re.search(rf"{re.escape(PDF)} pp?\. \d+", text), text[:2000]
    assert f"{PDF}:" not in text  # never lines of the extracted text


@asynccontextmanager
async def _mcp(state: Path) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ingestd.daemon", "mcp", "--state-dir", str(state)],
        env=dict(os.environ),
    )
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        yield s


@pytest.mark.anyio
async def test_every_answer_shape_carries_its_formats_citation_and_its_version(
    daemon: tuple[Book, Path, subprocess.Popen[bytes]],
) -> None:
    book, state, proc = daemon
    v2 = book.commits["v2"][:12]

    # ingestd search: hits and passages, JSON and text
    for question in (PDF_QUESTION, NOTEBOOK_QUESTION):
        hits = json.loads(_cli(state, "search", "--json", "-k", "8", question))
        _check_cites(book, hits, f"search --json {question!r}")
        passages = json.loads(_cli(state, "search", "--json", "--budget-tokens", "2048", question))
        _check_cites(book, passages, f"search --json --budget-tokens {question!r}")
    assert {h["path"] for h in hits} >= {NOTEBOOK}
    assert any("page" in p for p in json.loads(_cli(state, "search", "--json", PDF_QUESTION)))
    text = _cli(state, "search", "--version", "v2", PDF_QUESTION)
    _pdf_text_cite(text)
    assert f"version: v2 at {v2}" in text
    text = _cli(state, "search", "--version", "v2", "--budget-tokens", "2048", PDF_QUESTION)
    _pdf_text_cite(text)
    assert f"version: v2 at {v2}" in text and "cell " in _cli(state, "search", NOTEBOOK_QUESTION)

    # the Python API, through the daemon
    client = Client(state, local=False)
    for version in ("v1", "v2"):
        answer = client.search(PDF_QUESTION, k=8, budget_tokens=2048, version=version)
        _check_cites(book, list(answer), f"Client.search version={version}")
        assert {p["version"] for p in answer} == {version}
        _check_passages(answer, f"Client.search version={version}")
        assert any(p["path"] == PDF and p["end_page"] >= p["page"] for p in answer)
    hits = client.search(NOTEBOOK_QUESTION, k=8)
    _check_cites(book, list(hits), "Client.search hits")
    pdf_hit = next(h for h in client.search(PDF_QUESTION, k=8) if h["path"] == PDF)
    got = client.read(pdf_hit["id"], budget_tokens=1024)
    assert got["version"] == pdf_hit["version"] and got["commit"] == pdf_hit["commit"]
    _check_cites(book, [{"path": PDF, **c} for c in got["chunks"]], "Client.read chunks")
    assert got["lines"] is not None and got["lines"]["page"] <= pdf_hit["page"]
    assert got["lines"]["end_page"] >= pdf_hit["end_page"]

    # ingestd read: JSON and text
    read = json.loads(_cli(state, "read", "--json", pdf_hit["id"]))
    assert read["chunks"] and read["version"] == pdf_hit["version"]
    _check_cites(book, [{"path": PDF, **c} for c in [read["hit"], *read["chunks"]]], "read")
    text = _cli(state, "read", pdf_hit["id"])
    assert re.search(r"lines \d+-\d+ of \d+ \(pp?\. \d+", text), text[:600]
    assert f"version {pdf_hit['version']} at {pdf_hit['commit'][:12]}" in text
    page = json.loads(_cli(state, "read", "--json", "--path", PAGE, "--version", "v2"))
    assert page["commit"] == book.commits["v2"] and NEW_TEXT in page["lines"]["text"]

    # the MCP tools, through the official SDK's stdio client
    async with _mcp(state) as s:
        res = await s.call_tool("search", {"query": PDF_QUESTION, "version": "v2"})
        assert not res.is_error, res.content[0].text
        passages = res.structured_content["passages"]
        _check_cites(book, passages, "MCP search (passages)")
        assert {p["version"] for p in passages} == {"v2"}
        _pdf_text_cite(res.content[0].text)
        assert f"version v2 at {v2}" in res.content[0].text
        res = await s.call_tool("search", {"query": NOTEBOOK_QUESTION, "budget_tokens": None})
        _check_cites(book, res.structured_content["hits"], "MCP search (hits)")
        nb = next(h for h in res.structured_content["hits"] if h["path"] == NOTEBOOK)
        assert f"{NOTEBOOK} cell" in res.content[0].text
        res = await s.call_tool("read", {"id": nb["id"]})
        out = res.structured_content
        assert out["version"] == nb["version"] and out["commit"] == nb["commit"]
        _check_cites(book, [{"path": NOTEBOOK, **c} for c in out["chunks"]], "MCP read")
        assert out["lines"]["cell"] <= nb["cell"] and "(cell" in res.content[0].text

    # without the daemon, the state dir answers alike (the config says where the
    # repository is: the manifest records a source's mirror, not its url and refs)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    config = str(state.parent / "ingestd.yaml")
    local = json.loads(_cli(state, "search", "--json", "--budget-tokens", "2048", PDF_QUESTION))
    _check_cites(book, local, "search --json --budget-tokens, no daemon")
    assert json.loads(_cli(state, "read", "--json", "-c", config, pdf_hit["id"])) == read
