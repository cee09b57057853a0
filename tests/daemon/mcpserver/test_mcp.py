"""``ingestd mcp`` with real MCP clients of the official SDKs.

Fast tests drive the server in-process (the SDK's ``Client(server)``) on a state dir
indexed with the fake embedder, in sparse mode (no model). The end-to-end tests start
real ``ingestd mcp`` processes, with the SDK's stdio client and its streamable HTTP
client, on md-docs pages indexed with the real model; once without a daemon (the
server opens the state dir), once through a real ``ingestd run``. Their answers are
compared with ``ingestd search --json``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli import cli
from ingestd.daemon.client import Client
from ingestd.daemon.mcpserver.tools import build_server
from ingestd.daemon.mcpserver.transport import Address, is_loopback
from ingestd.store.search.passages import JOIN_LINES
from tests.helpers import copy_tree, ingestd_cmd, run_cli, sync_once, wait_for

PAGES = (
    "docs/collector/quick-start.md",
    "docs/concepts/glossary.md",
    "docs/languages/python/exporters.md",
)
QUESTIONS = (
    "how do I export traces to the console in python",
    "what is a span",
    "telemetrygen docker",
)
#: what stdio_client passes besides HOME, PATH, ...: the bundled model loads offline
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
TOKEN = "t0k3n-for-tests"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--http", "0.0.0.0:8765"], "not a loopback address"),
        (["--http", "192.168.1.5:8765", "--allow-remote"], "need a token"),
        (["--http", "example.org:8765", "--token", "x"], "--allow-remote"),
        (["--http", "8765"], "is not HOST:PORT"),
        (["--http", "127.0.0.1:99999"], "is not HOST:PORT"),
        (["--token", "x"], "--token and --allow-remote go with --http"),
    ],
)
def test_addresses_other_machines_reach_need_a_flag_and_a_token(
    args: list[str], message: str, tmp_path: Path
) -> None:
    res = CliRunner().invoke(cli, ["mcp", "--state-dir", str(tmp_path), *args])
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.org"))
    a = Address("[::1]:8765")
    assert (a.host, a.port, str(a)) == ("::1", 8765, "[::1]:8765")


# -- in-process: the tools, their schemas and errors -----------------------------------------------


@pytest.fixture
def indexed(tree: Path, tmp_path: Path) -> Path:
    state = tmp_path / "state"
    sync_once(tree, state)
    return state


@asynccontextmanager
async def _in_process(state: Path) -> AsyncIterator[Any]:
    from mcp.client import Client as McpClient

    async with McpClient(build_server(Client(state))) as c:
        yield c


@pytest.mark.anyio
async def test_tools_have_schemas_and_descriptions_for_a_model(indexed: Path) -> None:
    async with _in_process(indexed) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == {"search", "read", "sync", "status"}
    for t in tools.values():
        assert t.description and len(t.description) > 80 and t.output_schema
    search = tools["search"].input_schema
    assert search["required"] == ["query"]
    assert search["properties"]["k"]["maximum"] == 50
    assert set(search["properties"]) == {
        "query", "k", "path", "source", "mode", "budget_tokens", "version",
    }  # fmt: skip
    assert search["properties"]["budget_tokens"]["default"] == 2048
    assert tools["read"].input_schema["properties"]["budget_tokens"]["default"] == 1024
    # an agent is told how to ask for one version of a git source
    assert "version=" in tools["search"].description
    assert "branch or tag" in search["properties"]["version"]["description"]
    assert tools["search"].annotations.read_only_hint is True
    assert tools["sync"].annotations.read_only_hint is False
    assert {"hits", "passages", "mode", "query", "notes", "indexing"} <= set(
        tools["search"].output_schema["properties"]
    )
    assert set(tools["read"].input_schema["properties"]) >= {"id", "path", "start_line"}
    assert set(tools["sync"].input_schema["properties"]) == {"paths", "timeout_s", "sources"}
    assert "version" in tools["read"].input_schema["properties"]


@pytest.mark.anyio
async def test_search_read_status_and_sync_in_process(indexed: Path, tree: Path) -> None:
    async with _in_process(indexed) as c:
        args = {"query": "span attributes", "k": 3, "mode": "sparse", "budget_tokens": None}
        res = await c.call_tool("search", args)
        assert not res.is_error, res.content
        hits = res.structured_content["hits"]
        want = Client(indexed).search("span attributes", 3, mode="sparse")
        assert [h["id"] for h in hits] == [h["id"] for h in want]
        assert {"id", "source", "path", "start_line", "end_line", "heading_path", "text",
                "score", "rank"} <= set(hits[0])  # fmt: skip
        assert f"id {hits[0]['id']}" in res.content[0].text
        res = await c.call_tool("read", {"id": hits[0]["id"], "context": 1, "budget_tokens": None})
        got = res.structured_content
        assert got["hit"]["id"] == hits[0]["id"] and got["lines"]["text"]
        assert len(got["chunks"]) >= 2 and not got["stale"]
        st = (await c.call_tool("status", {})).structured_content
        assert st["daemon"] is None and st["sources"][0]["documents"] == 6
        assert st["sources"][0]["last_change_age_s"] >= 0
        page = tree / "docs/concepts/glossary.md"
        page.write_text(page.read_text() + "\n\n## Quokkas\n\nQuokkafication of metrics.\n")
        res = await c.call_tool("sync", {"paths": ["docs/concepts/glossary.md"]})
        report = res.structured_content
        assert report["complete"] and report["through_daemon"] is False
        assert report["sources"][0]["indexed"] == 1 and "all searchable" in res.content[0].text
        res = await c.call_tool("search", {"query": "quokkafication", "k": 1, "mode": "sparse"})
        assert "Quokkafication" in res.structured_content["passages"][0]["text"]


def _check_passages(root: Path, out: dict[str, Any], budget: int) -> None:
    """Passages are verbatim spans within the budget, merged: none overlaps, touches or
    lies within JOIN_LINES lines of another of its page."""
    from ingestd.chunkers.sizing.tokenizers import TiktokenSizer
    from ingestd.chunkers.text import decode

    count = TiktokenSizer("cl100k_base").count
    passages = out["passages"]
    assert passages and not out["hits"]
    assert out["tokens"] == sum(p["n_tokens"] for p in passages) <= budget
    assert [p["rank"] for p in passages] == list(range(1, len(passages) + 1))
    # a page once: its passages together, pages numbered in order, by page score
    pages = [p["page_rank"] for p in passages]
    assert pages == sorted(pages) and set(pages) == set(range(1, max(pages) + 1))
    assert len({p["path"] for p in passages}) == max(pages)
    page_scores = [
        next(p["page_score"] for p in passages if p["page_rank"] == n) for n in set(pages)
    ]
    assert page_scores == sorted(page_scores, reverse=True)
    by_file: dict[str, list[dict[str, Any]]] = {}
    for p in passages:
        text = decode((root / p["path"]).read_bytes())
        assert p["text"] == text[p["start_char"] : p["end_char"]]  # verbatim, gaps included
        assert p["n_tokens"] == count(p["text"])
        assert p["start_line"] == text.count("\n", 0, p["start_char"]) + 1
        by_file.setdefault(p["path"], []).append(p)
    for same in by_file.values():
        same.sort(key=lambda p: p["start_char"])
        for a, b in zip(same, same[1:], strict=False):
            gap = root.joinpath(a["path"]).read_text()[a["end_char"] : b["start_char"]]
            assert b["start_char"] > a["end_char"] and gap.strip(), "touching passages merge"
            assert b["start_line"] - a["end_line"] - 1 > JOIN_LINES, "near passages join"


@pytest.mark.anyio
async def test_search_with_a_budget_returns_merged_passages_within_it(
    indexed: Path, tree: Path
) -> None:
    async with _in_process(indexed) as c:
        for budget in (300, 2048):
            args = {"query": "collector configuration pipelines", "mode": "sparse", "k": 50}
            res = await c.call_tool("search", {**args, "budget_tokens": budget})
            assert not res.is_error, res.content
            out = res.structured_content
            _check_passages(tree, out, budget)
            assert out["budget_tokens"] == budget and out["mode"] == "sparse"
            assert f"of {budget} tokens" in res.content[0].text
            text = res.content[0].text
            for n in {p["page_rank"] for p in out["passages"]}:  # each file named once
                assert text.count(f"== file {n}: ") == 1
        # at 2,048 tokens the best chunks of one page come together as one passage
        assert any(len(p["ids"]) > 1 for p in out["passages"])
        hits = Client(indexed).search(args["query"], 50, mode="sparse", ranks=False)
        ids = [i for p in out["passages"] for i in p["ids"]]
        ranked = [h["id"] for h in hits]
        assert set(ids) <= set(ranked)
        # the passages hold the best hits: every hit ranked above the last one taken is
        # in a passage, unless it alone would not have fitted what was left
        assert ranked[0] in ids
        # the default budget of the tool, and the text an agent reads
        res = await c.call_tool("search", {"query": "span attributes", "mode": "sparse"})
        assert res.structured_content["budget_tokens"] == 2048
        assert res.structured_content["tokens"] <= 2048


@pytest.mark.anyio
async def test_read_within_its_budget_widens_to_the_section_first(
    indexed: Path, tree: Path
) -> None:
    from ingestd.chunkers.sizing.tokenizers import TiktokenSizer

    count = TiktokenSizer("cl100k_base").count
    hits = Client(indexed).search("collector pipeline receivers", 5, mode="sparse")
    async with _in_process(indexed) as c:
        for hit in hits:
            for budget in (64, 400, 1024):
                args = {"id": hit["id"], "budget_tokens": budget}
                got = (await c.call_tool("read", args)).structured_content
                lines, section = got["lines"], got["section"]
                assert got["tokens"] == count(lines["text"]) and got["budget_tokens"] == budget
                hit_lines = lines["start_line"] <= hit["start_line"] <= lines["end_line"]
                if count(hit["text"]) <= budget:
                    assert got["tokens"] <= budget and hit_lines
                    assert lines["end_line"] >= hit["end_line"]
                    inside = (lines["start_line"], lines["end_line"]) == (
                        section["start_line"],
                        section["end_line"],
                    )
                    # either the whole section and maybe more, or within the section
                    covers = (
                        lines["start_line"] <= section["start_line"]
                        and lines["end_line"] >= section["end_line"]
                    )
                    within = (
                        lines["start_line"] >= section["start_line"]
                        and lines["end_line"] <= section["end_line"]
                    )
                    assert inside or covers or within
                else:  # the hit alone is over: its first lines, cut
                    assert lines["start_line"] == hit["start_line"] and hit_lines
                assert not any(ch.get("text") for ch in got["chunks"])  # the lines hold it
        # without a budget, as before: the section or the neighbours, max_lines bounded
        got = (
            await c.call_tool("read", {"id": hits[0]["id"], "budget_tokens": None})
        ).structured_content
        assert got["tokens"] is None and got["hit"]["text"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("search", {"query": "x", "k": 0}, "invalid arguments for search: k: Input should be"),
        ("search", {"query": ""}, "invalid arguments for search: query: String should have"),
        ("search", {"query": "x", "mode": "fuzzy"}, "invalid arguments for search: mode:"),
        ("search", {"query": "x", "bogus": 1}, "unknown argument(s) bogus"),
        ("search", {"query": "x", "source": "nope", "mode": "sparse"}, "unknown source(s): nope"),
        ("read", {}, "give either id (a chunk id from a search hit) or path"),
        ("read", {"id": "nope"}, "not a chunk id: 'nope'"),
        ("read", {"path": "missing.md"}, "missing.md is not an indexed document"),
        ("sync", {"paths": ["/nowhere/a.md"]}, "/nowhere/a.md is under no source's root"),
        ("sync", {"timeout_s": 0}, "invalid arguments for sync: timeout_s: Input should be"),
        # the input checks of a new user's first calls
        ("search", {"query": "x", "path": "../..", "mode": "sparse"}, "path filter ../.. leaves"),
        ("search", {"query": "x", "path": "/etc", "mode": "hybrid"}, "path filter /etc is"),
        ("search", {"query": "x", "path": "../../etc/passwd"}, "path filter ../../etc/passwd"),
        ("sync", {"paths": ["nonexistent.md"]}, "nonexistent.md: not a file or folder of"),
        ("search", {"query": "x", "budget_tokens": 0}, "invalid arguments for search: budget"),
        ("read", {"id": "nope", "budget_tokens": -1}, "invalid arguments for read: budget"),
    ],
)
async def test_a_bad_call_is_a_one_line_tool_error(
    indexed: Path, tool: str, args: dict[str, Any], message: str
) -> None:
    async with _in_process(indexed) as c:
        res = await c.call_tool(tool, args)
        assert res.is_error
        text = res.content[0].text
        assert message in text and "\n" not in text and "Traceback" not in text, text
        assert " --" not in text  # no flag of the CLI: the tool's arguments are named
        # the server still answers
        assert not (await c.call_tool("status", {})).is_error


@pytest.mark.anyio
async def test_a_filter_that_matches_nothing_is_named_as_the_tool_names_it(indexed: Path) -> None:
    """The note names the tool's arguments (``version``, ``path``), never the CLI's flags."""
    async with _in_process(indexed) as c:
        for args, said in (
            ({"version": "v9"}, "nothing matches version v9: no source has versions"),
            ({"path": "nowhere/x.md"}, "nothing matches path nowhere/x.md: no document"),
        ):
            res = await c.call_tool("search", {"query": "span", "mode": "sparse", **args})
            assert not res.is_error, res.content
            notes = res.structured_content["notes"]
            assert any(n.startswith(said) for n in notes), notes
            assert not [n for n in notes if " --" in n], notes


@pytest.mark.anyio
async def test_the_state_dir_reaches_a_stdio_server_through_the_client_env(
    indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's stdio client passes the server only a few variables of its own
    environment (``HOME``, ``PATH``...): docs/getting-started/agents.md says to give the
    state dir in ``args`` or in the entry's ``env``; ``env`` works."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.helpers import ingestd_cmd

    monkeypatch.setenv("INGESTD_STATE_DIR", str(tmp_path / "elsewhere"))  # not passed on
    exe, *first = ingestd_cmd()
    params = StdioServerParameters(
        command=exe, args=[*first, "mcp"], env={**ENV, "INGESTD_STATE_DIR": str(indexed)}
    )
    with (tmp_path / "err.log").open("w") as err:
        async with stdio_client(params, errlog=err) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("status", {})
    assert not res.is_error, res.content
    assert res.structured_content["state_dir"] == str(indexed)


@pytest.mark.anyio
async def test_a_state_dir_without_sources_says_so(tmp_path: Path) -> None:
    async with _in_process(tmp_path / "empty") as c:
        res = await c.call_tool("search", {"query": "anything", "mode": "sparse"})
        assert res.is_error
        assert res.content[0].text == (
            f"nothing indexed in {tmp_path / 'empty'}: run "
            f"`ingestd resync --state-dir {tmp_path / 'empty'} PATH` first"
        )


# -- end to end: real processes, the real model ------------------------------------------------

#: Runs the CLI, then reports on stderr how it ended and which heavy modules it imported.
#: Neither line is written when the process is killed or leaves by a signal (os._exit).
_PROBE = """
import atexit, sys
def report():
    names = ("torch", "sentence_transformers", "transformers", "mcp")
    sys.stderr.write("LOADED=" + ",".join(m for m in names if m in sys.modules) + "\\n")
atexit.register(report)
from ingestd.daemon.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    sys.stderr.write(f"EXIT={exc.code}\\n")
    raise
"""


def _loaded(stderr: str) -> set[str]:
    (line,) = [x for x in stderr.splitlines() if x.startswith("LOADED=")]
    return set(line.removeprefix("LOADED=").split(",")) - {""}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, real_model: Any) -> Path:
    """md-docs pages indexed with the real model as source ``docs`` (``base/docs``, ``base/state``).

    The source has a name, so its point ids do not depend on where its folder is: each
    test copies the tree and the state (vectors included) with :func:`_copy`.
    """
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    base = tmp_path_factory.mktemp("mcp")
    root = copy_tree(base / "docs", PAGES)
    config = _config(base, root)
    eng = Engine(load_config(config), base / "state", embed_model=real_model)
    try:
        eng.sync("docs")
    finally:
        eng.close()
    return base


def _config(where: Path, root: Path, **extra: Any) -> Path:
    config = where / "config.yaml"
    config.write_text(json.dumps({"sources": [{"name": "docs", "root": str(root)}], **extra}))
    return config


def _copy(base: Path, dest: Path, **extra: Any) -> tuple[Path, Path, Path]:
    """A copy of the indexed tree and state: ``(root, state, config)``."""
    shutil.copytree(base / "docs", dest / "docs")
    shutil.copytree(base / "state", dest / "state")
    return dest / "docs", dest / "state", _config(dest, dest / "docs", **extra)


def _cli_search(state: Path, query: str, mode: str, k: int = 5, *flags: str) -> list[str]:
    args = ("search", "--state-dir", str(state), "--json", "--mode", mode, "-k", str(k), *flags)
    proc = run_cli(*args, query, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [h["id"] for h in json.loads(proc.stdout)]


@asynccontextmanager
async def _stdio(errlog: Path, *args: str) -> AsyncIterator[Any]:
    """The SDK's stdio client and session on ``ingestd mcp ARGS`` (run by :data:`_PROBE`)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-c", _PROBE, "mcp", *args], env=ENV
    )
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (r, w), ClientSession(r, w) as s:
            init = await s.initialize()
            assert init.server_info.name == "ingestd"
            assert init.capabilities.tools is not None
            yield s


def _check_tools(tools: list[Any]) -> None:
    """The four tools as a client lists them: input and output schemas, descriptions."""
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"search", "read", "sync", "status"}
    for t in tools:
        assert t.input_schema["type"] == "object" and t.output_schema["type"] == "object"
        assert t.description and len(t.description) > 80
    search = by_name["search"].input_schema
    assert set(search["properties"]) == {
        "query", "k", "path", "source", "mode", "budget_tokens", "version",
    }  # fmt: skip
    assert search["required"] == ["query"] and search["properties"]["k"]["maximum"] == 50
    assert "hits" in by_name["search"].output_schema["properties"]
    assert {"id", "path", "start_line", "end_line"} <= set(
        by_name["read"].input_schema["properties"]
    )
    assert set(by_name["sync"].input_schema["properties"]) == {"paths", "timeout_s", "sources"}
    assert "last_change_synced" in json.dumps(by_name["status"].output_schema)


async def _ids(s: Any, query: str, mode: str, k: int = 5, **filters: str) -> list[str]:
    args = {"query": query, "k": k, "mode": mode, "budget_tokens": None, **filters}
    res = await s.call_tool("search", args)
    assert not res.is_error, res.content[0].text
    return [h["id"] for h in res.structured_content["hits"]]


async def _widens_a_hit(s: Any) -> None:
    """``read`` gives a hit's section and the file's lines around it, beyond the hit."""
    found = await s.call_tool("search", {"query": QUESTIONS[0], "k": 1, "budget_tokens": None})
    hit = found.structured_content["hits"][0]
    args = {"id": hit["id"], "context": 1, "budget_tokens": None}
    got = (await s.call_tool("read", args)).structured_content
    assert got["hit"]["id"] == hit["id"] and not got["stale"]
    assert got["section"]["start_line"] <= hit["start_line"]
    assert hit["text"].strip() in got["lines"]["text"]
    lines = got["lines"]
    assert (lines["start_line"], lines["end_line"]) != (hit["start_line"], hit["end_line"])
    assert len(got["chunks"]) >= 2 and hit["id"] in {c["id"] for c in got["chunks"]}


async def _answers_passages_and_notes(s: Any, root: Path) -> None:
    """With the real model: passages within the default budget, a long query cut with a note."""
    found = await s.call_tool("search", {"query": QUESTIONS[0]})
    out = found.structured_content
    assert out["mode"] == "hybrid" and out["budget_tokens"] == 2048
    _check_passages(root, out, 2048)
    long = await s.call_tool("search", {"query": QUESTIONS[1] + " span" * 30_000, "k": 3})
    got = long.structured_content
    assert got["passages"] and any("cut to its first 254 word pieces" in n for n in got["notes"])
    assert got["query"].startswith(QUESTIONS[1]) and len(got["query"]) < 2_000


async def _edit_then_sync(s: Any, page: Path, word: str, *, through_daemon: bool) -> None:
    """After an edit, ``sync`` returns once the edit is searchable; ``status`` dates it.

    The daemon's watcher waits longer than this takes (``watch.debounce_ms``), so the
    edit is not searchable before ``sync`` and ``sync`` itself writes it.
    """
    rel = page.relative_to(page.parents[2]).as_posix()  # docs/concepts/glossary.md
    query = {"query": word.lower(), "k": 1, "mode": "sparse", "budget_tokens": None}
    edited = time.time()
    page.write_text(page.read_text() + f"\n\n## {word}\n\n{word} of baggage.\n")
    before = (await s.call_tool("search", query)).structured_content["hits"]
    assert not any(word in h["text"] for h in before)
    res = await s.call_tool("sync", {"paths": [rel], "timeout_s": 300})
    assert not res.is_error, res.content[0].text
    report = res.structured_content
    assert report["complete"] and report["through_daemon"] is through_daemon
    assert report["sources"][0]["indexed"] == 1 and report["sources"][0]["scope"] == [rel]
    found = await s.call_tool("search", query)
    assert word in found.structured_content["hits"][0]["text"]
    (src,) = (await s.call_tool("status", {})).structured_content["sources"]
    assert edited <= src["last_change_synced"] <= time.time()
    assert 0 <= src["last_change_age_s"] < 600


async def _bad_argument_is_a_tool_error(s: Any) -> None:
    bad = await s.call_tool("search", {"query": "x", "k": 500})
    assert bad.is_error and bad.content[0].text.startswith("invalid arguments for search: k:")
    assert "\n" not in bad.content[0].text
    bad = await s.call_tool("read", {"id": "nope"})
    assert bad.is_error and bad.content[0].text.startswith("not a chunk id: 'nope'")
    assert not (await s.call_tool("status", {})).is_error  # still serving


def _median_ms(seconds: list[float]) -> float:
    return round(1000 * sorted(seconds)[len(seconds) // 2], 1)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.timeout(1200)
async def test_stdio_server_without_a_daemon(corpus: Path, tmp_path: Path) -> None:
    """The SDK's stdio client: ranks as ``ingestd search --json``, read, sync, exit."""
    root, state, config = _copy(corpus, tmp_path)
    modes = ("hybrid", "dense", "sparse")
    # the rankings of the Python API, which `ingestd search` is a thin layer over (one
    # process loads the model once); one of them checked against the CLI itself
    from ingestd.daemon.client import Client

    with Client(state, config=config) as index:
        want = {
            (q, m): [h["id"] for h in index.search(q, mode=m)] for q in QUESTIONS for m in modes
        }
    assert _cli_search(state, QUESTIONS[0], "hybrid") == want[(QUESTIONS[0], "hybrid")]
    log = tmp_path / "mcp.log"
    t0 = time.monotonic()
    took: dict[str, list[float]] = {m: [] for m in modes}
    # the config names the copy's root (the manifest records the corpus fixture's)
    async with _stdio(log, "--state-dir", str(state), "--config", str(config)) as s:
        started = time.monotonic() - t0
        _check_tools((await s.list_tools()).tools)
        for _ in range(2):  # the first hybrid search loads the model
            for (q, mode), ids in want.items():
                t = time.monotonic()
                assert await _ids(s, q, mode) == ids, (q, mode)
                took[mode].append(time.monotonic() - t)
        await _widens_a_hit(s)
        await _answers_passages_and_notes(s, root)
        await _edit_then_sync(
            s, root / "docs/concepts/glossary.md", "Quokkas", through_daemon=False
        )
        await _bad_argument_is_a_tool_error(s)
        st = (await s.call_tool("status", {})).structured_content
        assert st["daemon"] is None and st["sources"][0]["source"] == "docs"
        closing = time.monotonic()
    closed = time.monotonic() - closing
    err = log.read_text()
    # it returned by itself, status 0, when stdin closed (a signal would leave no line)
    assert "EXIT=0" in err.splitlines(), err[-2000:]
    assert "Traceback" not in err
    print(
        f"\nstdio, no daemon: initialize after {started:.2f} s; search median "
        f"hybrid {_median_ms(took['hybrid'][1:])} ms (first, loading the model: "
        f"{took['hybrid'][0]:.1f} s), dense {_median_ms(took['dense'])} ms, "
        f"sparse {_median_ms(took['sparse'])} ms; "
        f"exit {closed:.2f} s after stdin closed"
    )


@pytest.fixture
def daemon(corpus: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A real ``ingestd run`` on a copy of the corpus: ``(root, state)``.

    Its watcher waits 60 s of quiet before it indexes an edit: what ``sync`` returns
    with is then ``sync``'s own doing.
    """
    watch = {"debounce_ms": 60_000, "max_delay_ms": 120_000}
    root, state, config = _copy(corpus, tmp_path, watch=watch)
    log_path = tmp_path / "daemon.log"
    log = log_path.open("w")
    cmd = [*ingestd_cmd(), "run", "--config", str(config), "--state-dir", str(state)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:

        def watching() -> bool:
            # a daemon that exited fails the fixture with its log, not a 600 s wait
            assert proc.poll() is None, f"the daemon exited:\n{log_path.read_text()[-3000:]}"
            st = run_cli("status", "--state-dir", str(state), "--json", timeout=120)
            d = json.loads(st.stdout or "{}").get("daemon") or {}
            return d.get("phase") == "watching" and bool(d.get("model_loaded"))

        wait_for(watching, 600, "the daemon to watch, its model loaded", interval=1.0)
        yield root, state
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def _http_server(state: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``ingestd mcp --http 127.0.0.1:0`` with a token; its URL, read from its stderr."""
    cmd = [*ingestd_cmd(), "mcp", "--state-dir", str(state), "--http", "127.0.0.1:0"]
    env = {**os.environ, "INGESTD_MCP_TOKEN": TOKEN}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    lines = []
    while time.monotonic() < deadline:
        if select.select([proc.stderr], [], [], 1.0)[0]:
            line = proc.stderr.readline().decode()
            lines.append(line)
            if "listening on " in line:
                log.write_text("".join(lines))
                return proc, line.split("listening on ", 1)[1].strip()
            if not line:
                break
    proc.kill()
    raise AssertionError(f"ingestd mcp --http did not start: {''.join(lines)}")


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.timeout(1500)
async def test_through_a_daemon_over_stdio_and_http(
    daemon: tuple[Path, Path], tmp_path: Path
) -> None:
    """The SDK's stdio and streamable HTTP clients, through a running daemon."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    root, state = daemon
    page = root / "docs/concepts/glossary.md"
    want = {q: _cli_search(state, q, "hybrid") for q in QUESTIONS}
    flags = ("--path", "docs/collector", "--source", "docs")
    in_collector = _cli_search(state, QUESTIONS[1], "hybrid", 5, *flags)
    took: list[float] = []
    log = tmp_path / "stdio.log"
    async with _stdio(log, "--state-dir", str(state)) as s:
        _check_tools((await s.list_tools()).tools)
        filtered = await _ids(s, QUESTIONS[1], "hybrid", path="docs/collector", source="docs")
        assert filtered == in_collector and filtered != want[QUESTIONS[1]]
        for _ in range(3):
            for q, ids in want.items():
                t = time.monotonic()
                assert await _ids(s, q, "hybrid") == ids, q
                took.append(time.monotonic() - t)
        await _widens_a_hit(s)
        await _edit_then_sync(s, page, "Axolotls", through_daemon=True)
        await _bad_argument_is_a_tool_error(s)
        st = (await s.call_tool("status", {})).structured_content
        assert st["daemon"] is not None and st["daemon"]["healthy"]
        everything = await s.call_tool("sync", {})
        assert everything.structured_content["sources"][0]["scope"] == "scan"
    # the write the sync made through the daemon is in the daemon's log
    daemon_log = (tmp_path / "daemon.log").read_text()
    assert "sync of source docs (1 path(s)): 1 indexed, 0 deleted, 0 failed" in daemon_log
    err = log.read_text()
    assert "EXIT=0" in err.splitlines() and "Traceback" not in err
    # through a daemon, the server never loads the model itself
    assert _loaded(err) == {"mcp"}

    # the edit changed the BM25 statistics (and so the hybrid rankings)
    want = {q: _cli_search(state, q, "hybrid") for q in QUESTIONS}
    server, url = _http_server(state, tmp_path / "http.log")
    took_http: list[float] = []
    try:
        async with httpx2.AsyncClient() as anonymous:
            r = await anonymous.post(url, json={}, headers={"Accept": "application/json"})
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=300) as http,
            streamable_http_client(url, http_client=http) as (r, w),
            ClientSession(r, w) as s,
        ):
            init = await s.initialize()
            assert init.server_info.name == "ingestd"
            _check_tools((await s.list_tools()).tools)
            for _ in range(3):
                for q, ids in want.items():
                    t = time.monotonic()
                    assert await _ids(s, q, "hybrid") == ids, q
                    took_http.append(time.monotonic() - t)
            await _widens_a_hit(s)
            await _edit_then_sync(s, page, "Narwhals", through_daemon=True)
            await _bad_argument_is_a_tool_error(s)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    print(
        f"\nthrough the daemon, hybrid search median: stdio {_median_ms(took)} ms, "
        f"HTTP {_median_ms(took_http)} ms"
    )


def test_help_imports_no_sdk() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, "mcp", "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "Example:" in proc.stdout
    assert _loaded(proc.stderr) == set()


@pytest.mark.slow
def test_the_stdio_server_exits_cleanly_when_stdin_closes(indexed: Path) -> None:
    """Raw JSON-RPC over pipes: stdout carries protocol lines only, EOF exits 0.

    A sparse search and status load no embedding model (nor torch).
    """
    cmd = [sys.executable, "-c", _PROBE, "mcp", "--state-dir", str(indexed)]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "search", "arguments": {"query": "span", "mode": "sparse"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "status", "arguments": {}}},
    ]  # fmt: skip
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in msgs).encode())
    proc.stdin.flush()
    replies = sorted((json.loads(proc.stdout.readline()) for _ in range(3)), key=lambda r: r["id"])
    assert [r["id"] for r in replies] == [1, 2, 3]  # calls run concurrently
    found = replies[1]["result"]["structuredContent"]  # the default budget: passages
    assert found["passages"] and found["tokens"] <= found["budget_tokens"] == 2048
    assert replies[2]["result"]["structuredContent"]["daemon"] is None
    t0 = time.monotonic()
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert time.monotonic() - t0 < 10
    assert proc.stdout.read() == b""
    stderr = proc.stderr.read().decode()
    assert "Traceback" not in stderr
    assert _loaded(stderr) == {"mcp"}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_typescript_sdk_client_agrees(indexed: Path, tree: Path, tmp_path: Path) -> None:
    """The official TypeScript SDK as a client (skipped without node, npm or the registry).

    Hits without a budget, merged passages within a budget, ``read`` within its budget.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed")
    sdk = tmp_path / "ts"
    sdk.mkdir()
    install = subprocess.run(
        [npm, "install", "--silent", "--no-audit", "--no-fund", "--fetch-retries=0",
         "--fetch-timeout=30000", "@modelcontextprotocol/sdk@^1"],
        cwd=sdk, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if install.returncode != 0:
        pytest.skip(f"npm could not install the TypeScript SDK: {install.stderr[-300:]}")
    script = sdk / "client.mjs"
    shutil.copyfile(Path(__file__).with_name("mcp_ts_client.mjs"), script)
    cmd = ingestd_cmd()
    env = {**os.environ, "SERVER": json.dumps([*cmd, "mcp", "--state-dir", str(indexed)])}
    proc = subprocess.run(
        [node, str(script)], cwd=sdk, capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert sorted(out["tools"]) == ["read", "search", "status", "sync"]
    want = Client(indexed).search("span attributes", 3, mode="sparse")
    assert out["search"] == [h["id"] for h in want]
    assert out["bad"]["isError"] is True and "k:" in out["bad"]["text"]
    assert out["read"] and out["read"] == out["search"][0]
    _check_passages(tree, out["passages"], 600)
    assert out["passages"]["mode"] == "sparse" and out["passages"]["budget_tokens"] == 600
    within = out["read_budget"]
    assert within["budget_tokens"] == 120 and within["tokens"] <= 120
    assert within["hit"]["id"] == out["search"][0] and within["lines"]["text"]


# -- the HTTP guards, as ASGI apps ------------------------------------------------------------


def _call(
    app: Any, method: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    import asyncio

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    asyncio.run(app(scope, receive, send))
    body = json.loads(
        b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    )
    return int(sent[0]["status"]), body


def test_an_event_stream_is_refused_and_a_wrong_token_is_told_apart_from_none() -> None:
    from ingestd.daemon.mcpserver.transport import BearerToken, NoEventStream

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    app = BearerToken(NoEventStream(inner), TOKEN)
    assert _call(app, "GET", {"Authorization": f"Bearer {TOKEN}"})[0] == 405  # no stream held
    assert _call(app, "POST", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    status, body = _call(app, "POST")
    assert status == 401 and body["error_description"] == "bearer token required"
    status, body = _call(app, "POST", {"Authorization": "Bearer not-it"})
    assert status == 401 and body["error_description"] == "the bearer token is not the server's"
    assert _call(NoEventStream(inner), "GET")[0] == 405  # loopback without a token too


def test_allow_remote_without_a_token_asks_for_the_token_not_the_flag(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        cli, ["mcp", "--state-dir", str(tmp_path), "--http", "192.168.1.5:8765", "--allow-remote"]
    )
    assert res.exit_code == 2 and "need a token" in res.output, res.output
    assert "pass --allow-remote" not in res.output
