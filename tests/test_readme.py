"""The README works on a fresh clone: its commands run as written, it is short, and it
leads into the site (``docs/``; the site's own checks are ``tests/test_docs*.py``)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from tests.helpers import REPO, run_cli

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


def test_the_fresh_clone_test_asks_the_quick_start_question() -> None:
    """``tests/daemon/watch/test_real_checkouts.py`` runs the quick start on a clone and
    waits for a README chunk among the hits of the README's own search."""
    _run, search, _test = _blocks(_section("Quick start"))
    (query,) = re.findall(r'ingestd search "([^"]+)"', search)
    clone_test = (REPO / "tests/daemon/watch/test_real_checkouts.py").read_text()
    assert f'daemon.search("{query}")' in clone_test


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


# -- a visitor's two minutes ------------------------------------------------------------------


def test_the_readme_is_short_and_leads_into_the_site() -> None:
    lines = README.splitlines()
    assert len(lines) <= 250, len(lines)
    intro = README.split("## Quick start")[0]
    for what in ("Sync", "Search", "Agents", "Applications", "MCP", "Python API"):
        assert what in intro, what  # what ingestd is, before the first command
    links = re.findall(r"\]\((docs/[^)#]+)", README)
    assert len(set(links)) >= 15
    for link in links:
        assert (REPO / link).is_file(), link
    assert "[LICENSE](LICENSE)" in README and (REPO / "LICENSE").is_file()


def test_every_command_and_option_of_the_readme_examples_exists() -> None:
    from ingestd.daemon.cli.main import cli

    (examples,) = _blocks(_section("Examples"))
    for line in examples.splitlines():
        words = shlex.split(line.split("|")[0], comments=True)
        assert words[0] == "ingestd", line
        cmd = cli.commands[words[1]]
        known = {o for p in cmd.params for o in getattr(p, "opts", [])}
        for w in words[2:]:
            if w.startswith("-"):
                assert w in known, f"{line}: {w}"
