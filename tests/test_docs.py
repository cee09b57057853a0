"""The documentation site works: every page is in the nav, its commands and snippets run,
and its reference pages name every command, option, config key, payload key, status
field and MCP tool the code has, so that they cannot drift apart."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.helpers import REPO, fake_vectors

DOCS = REPO / "docs"


def page(name: str) -> str:
    """The Markdown of ``docs/NAME``."""
    return (DOCS / name).read_text()


def section(text: str, title: str) -> str:
    """The text under the heading ``title`` of ``text``, up to the next heading of any level."""
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert m, f"no section {title!r}"
    return m.group(1)


def fenced(text: str, lang: str) -> list[str]:
    """The ```LANG blocks of ``text`` (for ``sh``: continuation lines joined)."""
    blocks = re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)
    return [b.replace("\\\n", " ") for b in blocks] if lang == "sh" else blocks


def tracked() -> set[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return set(out.splitlines())


def _nav_pages(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for n in node:
            yield from _nav_pages(n)
    elif isinstance(node, dict):
        for v in node.values():
            yield from _nav_pages(v)


# -- the site ---------------------------------------------------------------------------------


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    """``mkdocs build --strict`` (in .ci/run) fails on these too; this needs no MkDocs."""
    cfg = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    nav = list(_nav_pages(cfg["nav"]))
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages
    assert len(nav) == len(set(nav))
    assert cfg["theme"]["name"] == "material" and cfg.get("strict") is True
    assert cfg["validation"]["omitted_files"] == "warn"  # strict turns it into a failure


def test_ci_builds_the_site_strictly_with_the_package_it_installs() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "mkdocs build --strict" in ci
    pyproject = (REPO / "pyproject.toml").read_text()
    dev = re.search(r"^dev = \[(.*?)\]", pyproject, re.M | re.S)
    assert dev and "mkdocs-material" in dev.group(1)
    assert "'.[dev]'" in ci


def test_relative_links_between_pages_name_files_that_exist() -> None:
    for p in [*DOCS.rglob("*.md"), REPO / "README.md"]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", p.read_text()):
            if "://" in target:
                continue
            assert (p.parent / target).exists(), f"{p.relative_to(REPO)}: {target}"


def test_no_page_speaks_of_its_own_history() -> None:
    for p in DOCS.rglob("*.md"):
        if p.name == "changelog.md":
            continue
        text = " ".join(p.read_text().split())
        for phrase in (r"\bused to\b", r"\bBefore,", r"\buntil then\b", r"\bwas \w+ before\b"):
            assert not re.search(phrase, text), f"{p.relative_to(REPO)}: {phrase!r}"


def test_the_license_is_the_apache_license_pyproject_names() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 190
    assert re.search(r'^license = "Apache-2.0"$', (REPO / "pyproject.toml").read_text(), re.M)


# -- reference pages that cannot drift ----------------------------------------------------------


def test_every_command_and_option_is_in_the_commands_reference() -> None:
    import click

    from ingestd.daemon.cli.main import cli

    text = page("reference/commands.md")
    for name, cmd in cli.commands.items():
        part = section(text, f"ingestd {name}")
        for p in cmd.params:
            if not isinstance(p, click.Option) or p.name in ("log_level", "state_dir"):
                continue
            if p.name in ("config_path", "help"):  # the common options, at the top
                assert all(o in text.split("## ")[0] for o in p.opts), p.opts
            elif p.name == "socket_path":
                assert "--socket" in part or "--socket" in section(
                    text, "Through the daemon, or on the state dir"
                ), name
            else:
                assert any(f"`{o}" in part for o in p.opts), f"ingestd {name} {p.opts}"


def _config_keys() -> Iterator[tuple[str, str]]:
    """(section of the reference, key) for every field of the config models.

    A ``sources[]`` entry is validated by the model its ``kind`` names: every kind's.
    """
    import typing

    from pydantic import BaseModel

    from ingestd.daemon.config.models import Config
    from ingestd.daemon.sources.kinds import SOURCE_KINDS, config_model

    def walk(model: type[BaseModel], prefix: str, where: str) -> Iterator[tuple[str, str]]:
        for name, field in model.model_fields.items():
            sub = [
                a
                for a in (field.annotation, *typing.get_args(field.annotation))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ]
            if name == "sources":
                yield "Top level", name
                for kind in SOURCE_KINDS:
                    yield from walk(config_model(kind), "", f"`{name}[]`")
            elif sub and typing.get_origin(field.annotation) is tuple or name == "rules":
                yield "Top level", name
                yield from walk(sub[0], "", f"`{name}[]`")
            elif sub:
                yield from walk(sub[0], f"{prefix}{name}.", f"`{name}`")
            else:
                yield where, f"{prefix}{name}"

    yield from walk(Config, "", "Top level")


def test_the_docs_name_every_source_kind_and_no_other() -> None:
    """The parts of ingestd (how-it-works/index.md) named two kinds of source, a folder
    and a git checkout, after a third (sitemap) had come: the page's list of kinds, and
    the configuration reference's ``kind`` row, are the kinds of ``SOURCE_KINDS``."""
    from ingestd.daemon.sources.kinds import SOURCE_KINDS

    parts = section(page("how-it-works/index.md"), "The parts")
    listed = re.findall(r"^ +- `([a-z]+)`:", parts, re.M)
    assert listed and set(listed) == set(SOURCE_KINDS), listed
    reference = page("reference/configuration.md").splitlines()
    (row,) = (r for r in reference if r.startswith("| `kind`"))
    assert set(re.findall(r"`([a-z]+)` \(", row)) == set(SOURCE_KINDS), row


def test_every_config_key_is_in_the_configuration_reference() -> None:
    text = page("reference/configuration.md")
    keys = list(_config_keys())
    assert len(keys) > 50
    for where, key in keys:
        assert f"| `{key}` |" in section(text, where), f"{key} (under {where})"
    assert '--8<-- "config.example.yaml"' in page("guides/configuration.md")


def test_the_configuration_guide_examples_load(tmp_path: Path) -> None:
    from ingestd.daemon.config import load_config

    blocks = fenced(page("guides/configuration.md"), "yaml")
    blocks += fenced(page("getting-started/your-folder.md"), "yaml")
    blocks += fenced((REPO / "README.md").read_text(), "yaml")
    loaded = 0
    for i, block in enumerate(blocks):
        if block.startswith("--8<--"):
            continue
        cfg_file = tmp_path / f"c{i}.yaml"
        cfg_file.write_text(block)
        cfg = load_config(cfg_file)  # a missing root is a state, not an error
        assert cfg.sources, block
        loaded += 1
    assert loaded >= 3


@pytest.mark.slow
def test_every_status_field_is_in_the_status_reference(
    tree: Path, scratch: Path, fake_embedder: Any
) -> None:
    from ingestd.daemon.wire.protocol import request
    from tests.daemon.harness import Harness

    with Harness(tree, scratch / "state", fake_embedder) as h:
        st = request(h.state, "status", {}, timeout=30)
    text = page("reference/status.md")
    fields = set(st) | set(st["disk"]) | set(st["daemon"]) | set(st["daemon"]["watches"])
    for s in st["sources"]:
        fields |= set(s)
    missing = sorted(f for f in fields if f"`{f}`" not in text)
    assert missing == []


def test_every_mcp_tool_and_argument_is_in_the_mcp_reference(tmp_path: Path) -> None:
    from mcp.client import Client as McpClient

    from ingestd.daemon.client import Client
    from ingestd.daemon.mcpserver.tools import build_server

    async def tools() -> list[Any]:
        async with McpClient(build_server(Client(tmp_path))) as c:
            return list((await c.list_tools()).tools)

    text = page("reference/mcp-tools.md")
    listed = asyncio.run(tools())
    assert len(listed) == 4
    for t in listed:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{t.name}` |"))
        for arg in t.input_schema.get("properties", {}):
            assert f"`{arg}`" in row, f"{t.name}({arg})"


def test_the_exit_codes_page_says_what_run_does_on_ctrl_c() -> None:
    text = " ".join(page("reference/exit-codes.md").split())
    assert "| 130 | a one-shot command was interrupted with Ctrl-C |" in text
    assert "SIGTERM itself, from the first line of ingestd that runs" in text
    assert "takes both signals before it imports the command line" in text
    assert "the interpreter's own start" in text  # the window no Python code covers
    assert "exits **0**" in text
    # the tests that pin it: tests/daemon/service/test_run_e2e.py, and for the start
    # tests/daemon/cli/test_run_stop_at_start.py
    e2e = (REPO / "tests/daemon/service/test_run_e2e.py").read_text()
    assert "def test_ctrl_c_stops_run_cleanly_with_exit_0_and_a_one_shot_command_with_130" in e2e
    start = (REPO / "tests/daemon/cli/test_run_stop_at_start.py").read_text()
    assert "def test_a_signal_at_any_moment_of_the_start_stops_run_with_exit_0" in start


def test_the_development_page_maps_every_package() -> None:
    text = section(page("development.md"), "Map of the code")
    pyproject = (REPO / "pyproject.toml").read_text()
    packages = re.findall(r'"ingestd\.([a-z_.]+)"', pyproject.split("[tool.setuptools]")[1])
    for pkg in set(packages):
        folder = pkg.replace(".", "/")
        if folder in ("daemon", "chunkers", "store"):
            continue
        assert f"`{folder}/`" in text, folder
    for table in ("ENGINES", "BACKENDS", "SOURCE_KINDS"):
        assert f"`{table}`" in section(page("development.md"), "Where a change goes")


# -- payload ----------------------------------------------------------------------------------

_PAGE = """---
title: The collector
linkTitle: Collector
description: Receives, processes and exports telemetry.
---

# Collector

The collector receives traces. It processes them in pipelines.

## Exporters

Exporters send data to a backend. Each exporter has a queue.
Another sentence follows here. And one more sentence ends it.
"""

_RULES = [
    {
        "name": "tok",
        "match": ["token/*"],
        "chunker": "token",
        "params": {"max_tokens": 16, "overlap": 2},
    },
    {"name": "hier", "match": ["hier/*"], "chunker": "hierarchical"},
    {"name": "sem", "match": ["sem/*"], "chunker": "semantic"},
    {"name": "md", "match": ["*"], "chunker": "markdown"},
]


def _keys(text: str) -> set[str]:
    return set(re.findall(r"`([a-zA-Z_]+)`", text))


def _payload_page() -> tuple[set[str], set[str], set[str]]:
    """(keys the store holds, keys the preview leaves out, keys it adds), per the page."""
    text = page("reference/payload.md")
    stored = {m for m in re.findall(r"^\| `([a-zA-Z_]+)` \|", section(text, "Stored keys"), re.M)}
    preview = section(text, "The preview: `ingestd chunk`")
    left_out = preview.split("It leaves out:", 1)[1].split("\n- an empty", 1)[0]
    added = preview.split("It adds", 1)[1]
    return stored, _keys(left_out), {k for k in _keys(added) if k != "true"}


def _git_points(tmp: Path) -> dict[str, dict[str, Any]]:
    """The points of a git source with two tags that share text (and moved some)."""
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine
    from tests.gitrepos import HistoryRepo
    from tests.helpers import store_snapshot

    repo = HistoryRepo(tmp / "repo")
    repo.tag("v1")
    for _ in range(3):
        repo.next_commit()
    repo.tag("v2")
    repo.push()
    state = tmp / "git-state"
    source = {"kind": "git", "name": "book", "url": str(repo.origin), "refs": ["v*"]}
    cfg = load_config(None, overrides={"state_dir": str(state), "sources": [source]})
    eng = Engine(cfg, state, embed_model=fake_vectors)
    try:
        eng.context.source("book").refresh()  # type: ignore[attr-defined]
        eng.sync("book")
    finally:
        eng.close()
    return store_snapshot(state)


def test_payload_page_names_every_key_the_store_holds(tmp_path: Path) -> None:
    from ingestd.daemon.cli.main import cli
    from tests.helpers import make_engine, store_snapshot

    root = tmp_path / "docs"
    for folder in ("token", "hier", "sem", "md"):
        (root / folder).mkdir(parents=True)
        (root / folder / "page.md").write_text(_PAGE)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    eng = make_engine(root, tmp_path / "state", fake_vectors, rules=_RULES)
    try:
        (name,) = eng.context.sources
        eng.sync(name)
    finally:
        eng.close()
    points = store_snapshot(tmp_path / "state")
    both = {**points, **_git_points(tmp_path)}  # the keys only a git source's points hold
    held = {k for p in both.values() for k in p if not k.startswith("(")}  # "(bm25)": a vector
    stored, left_out, added = _payload_page()
    assert held == stored, (
        f"held but not on the page: {sorted(held - stored)}; "
        f"on the page but not held: {sorted(stored - held)}"
    )
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"sources": [{"root": str(root)}], "rules": _RULES}))
    shown: set[str] = set()
    for folder in ("token", "hier", "md"):
        args = ["chunk", "--config", str(cfg), "--state-dir", str(tmp_path / "state")]
        res = CliRunner().invoke(cli, [*args, str(root / folder / "page.md")])
        assert res.exit_code == 0, res.output
        shown |= {k for line in res.stdout.splitlines() for k in json.loads(line)}
    by_chunker: dict[str, set[str]] = {}
    for p in points.values():
        by_chunker.setdefault(p["chunker"], set()).update(k for k in p if not k.startswith("("))
    previewed = set().union(*(by_chunker[c] for c in ("token", "hierarchical", "markdown")))
    assert previewed - shown == left_out
    assert shown - previewed == added


@pytest.mark.parametrize("key", ["n_model_tokens", "prefix", "is_parent", "path_prefixes"])
def test_payload_page_names_the_keys_people_ask_about(key: str) -> None:
    assert f"`{key}`" in page("reference/payload.md")


def test_every_ingestd_command_line_on_the_site_names_real_commands_and_options() -> None:
    import shlex

    from ingestd.daemon.cli.main import cli

    common = {"--config", "-c", "--state-dir", "--log-level", "-h", "--help"}
    seen = 0
    for p in [*DOCS.rglob("*.md"), REPO / "README.md"]:
        for block in fenced(p.read_text(), "sh"):
            for line in block.splitlines():
                lex = shlex.shlex(line, posix=True, punctuation_chars=True)
                lex.whitespace_split, lex.commenters = True, "#"
                tokens = list(lex)
                segments: list[list[str]] = [[]]
                for tok in tokens:
                    if tok in ("&&", "|", ";", "||", ">", "(", ")"):
                        segments.append([])
                    else:
                        segments[-1].append(tok)
                for words in segments:
                    if _is_ingestd(words):
                        _check_words(words, f"{p.relative_to(REPO)}: {line.strip()}", cli, common)
                        seen += 1
    assert seen > 40


def _is_ingestd(words: list[str]) -> bool:
    return len(words) >= 2 and words[0].endswith("ingestd") and words[1] != "--version"


def _check_words(words: list[str], where: str, cli: Any, common: set[str]) -> None:
    assert words[1] in cli.commands, where
    cmd = cli.commands[words[1]]
    known = common | {o for prm in cmd.params for o in getattr(prm, "opts", [])}
    for w in words[2:]:
        if w.startswith("-") and not w.lstrip("-").isdigit():
            assert w.split("=")[0] in known, f"{where}: {w}"


def test_the_commands_reference_gives_the_cli_bounds_of_search_and_read() -> None:
    """The CLI's ranges (click's IntRange) are stated beside the MCP tools' own."""
    from ingestd.daemon.cli.main import cli

    text = " ".join(page("reference/commands.md").split())
    for command, name in (("search", "k"), ("search", "budget_tokens"), ("read", "budget_tokens")):
        (param,) = [p for p in cli.commands[command].params if p.name == name]
        assert f"{param.type.min} to {param.type.max}" in text, (command, name)  # type: ignore[attr-defined]
    assert "the MCP tool's `k` is at most 50" in text
    assert "the MCP tool's `budget_tokens` is 64 to 32768" in text
