"""The README works on a fresh clone: its commands run as written and its lists are exact."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.helpers import REPO, fake_vectors, run_cli

README = (REPO / "README.md").read_text()


def _section(title: str) -> str:
    """The text of the README section headed ``title`` (up to the next heading)."""
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ )", README, re.M | re.S)
    assert m, f"no section {title!r} in README.md"
    return m.group(1)


def _blocks(text: str) -> list[str]:
    """The ```sh blocks of ``text``, with continuation lines joined."""
    return [b.replace("\\\n", " ") for b in re.findall(r"```sh\n(.*?)```", text, re.S)]


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return out.splitlines()


# -- quick start ------------------------------------------------------------------------------


def test_quick_start_indexes_a_folder_a_fresh_clone_has(tmp_path: Path) -> None:
    run_block, _search, test_block = _blocks(_section("Quick start"))
    (run_cmd,) = [c for c in run_block.split("&&") if "ingestd run" in c]
    args = shlex.split(run_cmd)[2:]
    paths = [a for a in args if not a.startswith("-")]
    assert paths, run_cmd
    tracked = _tracked()
    for p in paths:  # a folder of the clone, not one the user must create
        assert p == "." or any(f.startswith(p.strip("./") + "/") for f in tracked), p
    # what it would index, planned for real (no embedding): no virtualenv, some docs
    res = run_cli(
        "resync", "--dry-run", "--json", "--state-dir", str(tmp_path / "s"), *paths, timeout=300
    )
    assert res.returncode == 0, res.stderr
    (plan,) = json.loads(res.stdout)["sources"]
    assert "README.md" in plan["add"]
    assert not [p for p in plan["add"] if p.startswith(".venv")]
    assert "~/.local/state/ingestd" in _section("Quick start")  # says where the state goes


def test_setup_commands_use_separate_virtualenvs_and_ci_runs_the_readme() -> None:
    run_block, _search, test_block = _blocks(_section("Quick start"))
    venvs = [re.findall(r"python3 -m venv (\S+)", b)[0] for b in (run_block, test_block)]
    assert venvs[0] != venvs[1], venvs
    for v in venvs:  # git-ignored, so `ingestd run .` and git leave them out
        subprocess.run(["git", "check-ignore", "-q", f"{v}/x"], cwd=REPO, check=True)
    assert "pytest" in test_block
    assert (
        test_block.strip().replace("pip install -e", "pip install -q -e")
        in (REPO / ".ci" / "run").read_text()
    )
    assert re.search(r"takes about \d+ minutes on 2 idle cores", _section("Quick start"))


# -- systemd ----------------------------------------------------------------------------------


def test_systemd_commands_work_from_the_repository_root(tmp_path: Path) -> None:
    from ingestd.daemon.config import load_config

    text = _section("Running under systemd")
    flat = " ".join(text.split())
    assert "from the root of this repository, in this order" in flat
    assert "edit `root:`" in flat
    (block,) = _blocks(text)[:1]
    tracked = set(_tracked())
    for cmd in re.split(r"&&|\n", block):
        words = shlex.split(cmd, comments=True)
        if not words:
            continue
        if words[0] == "install" and "-D" not in words:  # install FILES... DEST
            sources = [w for w in words[1:-1] if not w.startswith("-") and w != "0644"]
            assert sources and all(s in tracked for s in sources), cmd
        if words[0] == "install" and "-D" in words:
            assert words[-2] in tracked, cmd
        assert "./ingestd" not in words, cmd  # one folder: the repository's root
        if "pip" in words[0]:
            assert words[-1] == ".", cmd
    # the sed line really points the example config at the tree
    (sed,) = [c for c in block.splitlines() if c.startswith("sed ")]
    conf = tmp_path / "config.yaml"
    conf.write_text((REPO / "config.example.yaml").read_text())
    words = shlex.split(sed, comments=True)
    subprocess.run([*words[:-1], str(conf)], check=True)
    cfg = load_config(conf)  # /srv/docs need not exist here
    assert [str(s.root) for s in cfg.sources] == ["/srv/docs"]


def test_unit_keeps_the_state_private_and_the_socket_for_the_group() -> None:
    for unit in ("ingestd.service", "ingestd-verify.service"):
        text = (REPO / "systemd" / unit).read_text()
        assert re.search(r"^UMask=0077$", text, re.M), unit
        assert re.search(r"^StateDirectoryMode=0700$", text, re.M), unit
    service = (REPO / "systemd" / "ingestd.service").read_text()
    assert re.search(r"^RuntimeDirectoryMode=0750$", service, re.M)
    assert "--socket" in _section("Running under systemd") or "INGESTD_SOCKET" in README


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


def _payload_section() -> tuple[set[str], set[str], set[str]]:
    """(keys the store holds, keys the preview leaves out, keys it adds), per the README."""
    from ingestd.chunkers.registry import CHUNKERS

    text = _section("Payload")
    for name in CHUNKERS:  # strategy names, not keys
        text = text.replace(f"`{name}`", name)
    stored_part, _, preview_part = text.partition("`ingestd chunk`")
    left_out = preview_part.split("except", 1)[1].split("(")[0]
    added = preview_part.split("adds", 1)[1]
    return (
        set(re.findall(r"`([a-z_A-Z]+)`", stored_part)),
        set(re.findall(r"`([a-z_A-Z]+)`", left_out)),
        {k for k in re.findall(r"`([a-z_A-Z]+)`", added) if k != "true"},
    )


def test_payload_list_names_every_key_the_store_holds(tmp_path: Path) -> None:
    from tests.helpers import make_engine, store_snapshot

    root = tmp_path / "docs"
    for folder in ("token", "hier", "sem", "md"):
        (root / folder).mkdir(parents=True)
        (root / folder / "page.md").write_text(_PAGE)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    eng = make_engine(root, tmp_path / "state", fake_vectors, rules=_RULES)
    try:
        (name,) = eng.sources
        eng.sync(name)
    finally:
        eng.close()
    points = store_snapshot(tmp_path / "state")
    held = {k for p in points.values() for k in p if not k.startswith("(")}  # "(bm25)": a vector
    readme_stored, left_out, added = _payload_section()
    readme_stored -= {"true"}
    assert held == readme_stored, (
        f"held but not in the README: {sorted(held - readme_stored)}; "
        f"in the README but not held: {sorted(readme_stored - held)}"
    )
    # the preview: what it leaves out and what it adds, as the README says
    from ingestd.daemon.cli.main import cli

    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"sources": [{"root": str(root)}], "rules": _RULES}))
    shown: set[str] = set()
    for folder in ("token", "hier", "md"):
        res = CliRunner().invoke(
            cli,
            [
                "chunk",
                "--config",
                str(cfg),
                "--state-dir",
                str(tmp_path / "state"),
                str(root / folder / "page.md"),
            ],
        )
        assert res.exit_code == 0, res.output
        shown |= {k for line in res.stdout.splitlines() for k in json.loads(line)}
    by_chunker: dict[str, Any] = {}
    for p in points.values():
        by_chunker.setdefault(p["chunker"], set()).update(k for k in p if not k.startswith("("))
    held_previewed = set().union(*(by_chunker[c] for c in ("token", "hierarchical", "markdown")))
    assert held_previewed - shown == left_out
    assert shown - held_previewed == added


@pytest.mark.parametrize("key", ["n_model_tokens", "prefix", "is_parent"])
def test_payload_section_names_the_keys_people_ask_about(key: str) -> None:
    assert f"`{key}`" in _section("Payload")


# -- using the index from your code -------------------------------------------------------------


def _fenced(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_the_mcp_configuration_snippets_are_valid_ingestd_mcp_commands() -> None:
    from ingestd.daemon.cli.consumers import mcp_cmd

    text = _section("Agents: `ingestd mcp`")
    (config,) = _fenced(text, "json")
    (server,) = json.loads(config)["mcpServers"].values()
    assert server["command"] == "ingestd" and server["args"][0] == "mcp"
    socket_args = json.loads(re.search(r'"args": (\[.*?\])', text.replace("\n", " "))[1])
    (http,) = _blocks(text)
    http_args = shlex.split(http)
    http_args = http_args[http_args.index("ingestd") + 1 :]
    for args in (server["args"], socket_args, http_args):
        assert args[0] == "mcp", args
        mcp_cmd.make_context("mcp", args[1:])  # the options exist and parse
    assert "--allow-remote" in text and "INGESTD_MCP_TOKEN" in text


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_python_api_snippets_run(tmp_path: Path, real_model: Any) -> None:
    from tests.helpers import copy_tree, local_mode_copy, make_engine

    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    eng = make_engine(root, state, fake_vectors)
    try:
        for name in eng.sources:
            eng.sync(name)
    finally:
        eng.close()
    client_code, query_code = _fenced(_section("Applications: the Python API"), "python")
    page = "docs/collector/quick-start.md"
    (root / page).write_text((root / page).read_text() + "\n\nConfigure the exporter here.\n")
    client_code = client_code.replace("/var/lib/ingestd", str(state))
    client_code = client_code.replace("docs/install.md", page)
    out: dict[str, Any] = {}
    exec(compile(client_code, "README.md", "exec"), out)
    assert out["widened"]["lines"]["text"]
    # the Qdrant a server would be: qdrant-client's local mode, holding the same points
    server = local_mode_copy(state, tmp_path / "server")
    query_code = query_code.replace("/var/lib/ingestd", str(server))
    query_code = query_code.replace('url="http://qdrant:6333"', f'path="{server / "qdrant"}"')
    try:
        exec(compile(query_code, "README.md", "exec"), out)
        assert out["hit"].payload["path"].startswith("docs/collector")
        got = out["qb"].search(out["client"], "how do I configure the exporter", k=5)
    finally:
        out["client"].close()
    # the same hits as `ingestd search` on that store (the builder embeds the query with
    # the recorded model, the real one)
    from ingestd.daemon.commands.search import search as search_cmd

    eng = make_engine(root, server, real_model, qdrant={"engine": "local"})
    try:
        want = search_cmd(eng, "how do I configure the exporter", k=5)
    finally:
        eng.close()
    assert [h.id for h in got] == [h["id"] for h in want]
