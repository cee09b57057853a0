"""Passages end to end, with the real model: a page once, near spans joined, the budget exact.

Two real md-docs pages chunked small (a markdown rule of 60 tokens, so that hits of a
page often lie a short chunk apart) and indexed by ``ingestd resync``; one budgeted
question, answered alike by ``ingestd search --json``, the Python :class:`Client` and
the MCP ``search`` tool (one code path: ``answer_request``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from ingestd.daemon.cli import cli
from ingestd.daemon.client import Client
from ingestd.daemon.mcpserver.tools import build_server
from ingestd.store.search.passages import JOIN_LINES
from tests.helpers import copy_tree

PAGES = ("docs/concepts/glossary.md", "docs/concepts/signals/traces.md")
QUESTION = "span attributes and events"
BUDGET = 1024


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _check(root: Path, passages: list[dict[str, Any]], tokens: int, hits: list[Any]) -> None:
    """A page once, its spans apart by more than JOIN_LINES lines, verbatim, budget exact."""
    from ingestd.chunkers.sizing.tokenizers import TiktokenSizer
    from ingestd.chunkers.text import decode

    count = TiktokenSizer("cl100k_base").count
    assert passages and tokens == sum(p["n_tokens"] for p in passages) <= BUDGET
    pages = [p["page_rank"] for p in passages]
    assert pages == sorted(pages) and len({p["path"] for p in passages}) == max(pages)
    by_page: dict[str, list[dict[str, Any]]] = {}
    for p in passages:
        text = decode((root / p["path"]).read_bytes())
        assert p["text"] == text[p["start_char"] : p["end_char"]]  # the lines between too
        assert p["n_tokens"] == count(p["text"])
        by_page.setdefault(p["path"], []).append(p)
    for same in by_page.values():
        assert [p["rank"] for p in same] == sorted(p["rank"] for p in same)
        same.sort(key=lambda p: p["start_line"])
        for a, b in zip(same, same[1:], strict=False):
            assert b["start_line"] - a["end_line"] - 1 > JOIN_LINES, (a, b)
    # a span joined across a chunk no hit holds: read from the index, not a hit itself
    ranked = {h["id"] for h in hits}
    assert any(set(p["ids"]) - ranked for p in passages)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_page_is_listed_once_with_near_spans_joined_alike_in_cli_client_and_mcp(
    tmp_path: Path,
) -> None:
    from mcp.client import Client as McpClient

    root = copy_tree(tmp_path / "docs", PAGES)
    state = tmp_path / "state"
    config = tmp_path / "ingestd.yaml"
    rule = {"name": "small", "match": ["*.md"], "chunker": "markdown"}
    rule["params"] = {"max_tokens": 60}
    config.write_text(
        yaml.safe_dump(
            {
                "state_dir": str(state),
                "sources": [{"name": "docs", "root": str(root)}],
                "rules": [rule],
            }
        )
    )
    args = ["--config", str(config)]
    runner = CliRunner()
    res = runner.invoke(cli, ["resync", *args])
    assert res.exit_code == 0, res.output
    search = ["search", *args, "-k", "10", "--budget-tokens", str(BUDGET)]
    res = runner.invoke(cli, [*search, "--json", QUESTION])
    assert res.exit_code == 0, res.output
    from_cli = json.loads(res.stdout)

    client = Client(config=config)
    got = client.search(QUESTION, k=10, budget_tokens=BUDGET)
    assert got.passages is not None and got.tokens is not None
    _check(root, list(got.passages), got.tokens, got.hits)
    assert list(got) == got.passages == from_cli
    async with McpClient(build_server(client)) as c:
        out = await c.call_tool("search", {"query": QUESTION, "k": 10, "budget_tokens": BUDGET})
    assert [p["ids"] for p in out.structured_content["passages"]] == [p["ids"] for p in from_cli]
    assert out.structured_content["tokens"] == got.tokens
