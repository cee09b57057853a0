"""The command line: help and docs for every command, config errors, lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from ingestd.daemon.config import ConfigError, load_config
from tests.helpers import REPO, copy_tree

COMMANDS = sorted(cli.commands)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_with_an_example(name: str) -> None:
    res = CliRunner().invoke(cli, [name, "--help"])
    assert res.exit_code == 0
    assert "Example:" in res.output
    assert "--state-dir" in res.output and "--config" in res.output


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_a_section_in_the_commands_reference(name: str) -> None:
    text = (REPO / "docs" / "reference" / "commands.md").read_text()
    assert f"\n## ingestd {name}\n" in text


def test_example_config_loads(tmp_path: Path) -> None:
    example = tmp_path / "config.yaml"
    example.write_text((REPO / "config.example.yaml").read_text())
    (tmp_path / "docs").mkdir()
    cfg = load_config(example)
    assert cfg.sources[0].name == "docs"
    assert cfg.sources[0].root == (tmp_path / "docs").resolve()
    assert [r.chunker for r in cfg.rules] == [
        "markdown", "mdx", "rst", "notebook", "html", "pdf", "asciidoc", "code", "sentence",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        (
            "rules:\n  - match: ['*']\n    chunker: token\n    params: {max_tokens: -1}\n",
            "rules[0].params: max_tokens must be > 0",
        ),
        (
            "rules:\n  - match: ['*']\n    chunker: tokn\n",
            "rules[0].chunker: unknown chunker 'tokn'; did you mean token? expected one of:",
        ),
        (
            "rules:\n  - match: ['*']\n    chunker: token\n    params: {max_tokens: lots}\n",
            "rules[0].params.max_tokens: Input should be a valid integer",
        ),
        ("watch:\n  debounce_ms: soon\n", "watch.debounce_ms: Input should be a valid integer"),
        (
            "embedding:\n  batchsize: 3\n",
            "embedding.batchsize: unknown key; check its spelling (did you mean batch_size?)",
        ),
        (
            "sources:\n  - root: c.yaml\n",  # the config file itself
            "c.yaml is a file; a source root is the folder that holds the documents",
        ),
        ("sources: [\n", "invalid YAML"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, yaml_text: str, expected: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(yaml_text)
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    assert expected in str(exc.value)
    res = CliRunner().invoke(
        cli, ["resync", "--config", str(f), "--state-dir", str(tmp_path / "s")]
    )
    assert res.exit_code == 2
    assert expected in res.output


def test_a_key_of_another_kind_is_named_with_its_kind_and_an_unknown_kind_is_one_error(
    tmp_path: Path,
) -> None:
    """Every kind refuses every key it does not read, naming the kind the key belongs to
    (a git source took ``root:`` silently: the key is on the model all kinds share); a
    misspelled kind is one line with the nearest kind, its other keys left unjudged."""
    from tests.helpers import run_cli

    (tmp_path / "docs").mkdir()
    config = tmp_path / "c.yaml"
    config.write_text(
        f"""sources:
  - {{kind: git, name: book, url: /nowhere.git, refs: [main], root: {tmp_path}/docs}}
  - {{kind: git, name: b2, url: /nowhere.git, refs: [main], gitignore: false}}
  - {{root: {tmp_path}/docs, refs: [main], poll_s: 5, inclde: ['*.md']}}
  - {{kind: gti, url: /nowhere.git, refs: [main]}}
"""
    )
    res = run_cli("resync", "--dry-run", "--config", str(config), "--state-dir", str(tmp_path))
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[1:] == [
        "sources[0].root: root is a key of kind: local sources (this source is kind: git)",
        "sources[1].gitignore: gitignore is a key of kind: local sources "
        "(this source is kind: git)",
        "sources[2].refs: refs is a key of kind: git sources (this source is kind: local)",
        "sources[2].poll_s: poll_s is a key of kind: git or kind: sitemap sources "
        "(this source is kind: local)",
        "sources[2].inclde: unknown key; check its spelling (did you mean include?)",
        "sources[3].kind: unknown source kind 'gti'; did you mean git? "
        "expected one of: git, local, sitemap",
    ]


def test_source_named_after_canonical_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    a = load_config(None, roots=["./docs"]).sources[0]
    b = load_config(None, roots=[str(tmp_path / "docs" / ".." / "docs")]).sources[0]
    assert a.name == b.name == str((tmp_path / "docs").resolve())


def test_state_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ingestd.daemon.config import resolve_state_dir

    monkeypatch.delenv("INGESTD_STATE_DIR", raising=False)
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/ingestd:/var/lib/other")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert resolve_state_dir(None) == Path("/var/lib/ingestd")
    monkeypatch.setenv("INGESTD_STATE_DIR", str(tmp_path / "env"))
    assert resolve_state_dir(None) == tmp_path / "env"
    assert resolve_state_dir(tmp_path / "flag") == tmp_path / "flag"
    monkeypatch.delenv("INGESTD_STATE_DIR")
    monkeypatch.delenv("STATE_DIRECTORY")
    assert resolve_state_dir(None) == tmp_path / "xdg" / "ingestd"


_PROBE = """
import atexit, sys
def report():
    heavy = [m for m in ("torch", "sentence_transformers", "qdrant_client", "transformers")
             if m in sys.modules]
    sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
atexit.register(report)
from ingestd.daemon.cli.main import main
main(sys.argv[1:])
"""


def _probe(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=120
    )
    heavy = [line for line in proc.stderr.splitlines() if line.startswith("HEAVY=")]
    return proc.returncode, heavy[-1].removeprefix("HEAVY=") if heavy else "?", proc.stdout


def test_status_help_and_noop_resync_never_import_the_model_stack(tmp_path: Path) -> None:
    from tests.helpers import fake_vectors, make_engine

    root = copy_tree(tmp_path / "docs", ("docs/collector/quick-start.md",))
    state = tmp_path / "state"
    eng = make_engine(root, state, fake_vectors)
    eng.sync(next(iter(eng.context.sources)))
    eng.close()
    for args in (
        ["--help"],
        ["status", "--state-dir", str(state), "--json"],
        ["resync", "--state-dir", str(state), str(root)],
    ):
        code, heavy, out = _probe(*args)
        assert code == 0, (args, out)
        assert heavy == "", f"{args} imported {heavy}"
    code, _, out = _probe("status", "--state-dir", str(state), "--json")
    st = json.loads(out)
    assert st["sources"][0]["documents"] == 1 and st["daemon"] is None


def test_chunk_preview_json_lines(tmp_path: Path) -> None:
    f = tmp_path / "page.md"
    f.write_text("# Title\n\nFirst paragraph.\n\n## Part\n\nSecond paragraph.\n")
    res = CliRunner().invoke(
        cli,
        ["chunk", str(f), "--chunker", "token", "--param", "max_tokens=4", "--param", "overlap=1"],
    )
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    text = f.read_text()
    assert all(text[o["start_char"] : o["end_char"]] == o["text"] for o in lines)
    assert all(
        {
            "id",
            "source",
            "path",
            "ordinal",
            "start_line",
            "end_line",
            "n_tokens",
            "n_model_tokens",
            "start_token",
            "end_token",
        }
        <= set(o)
        for o in lines
    )
    assert max(o["n_tokens"] for o in lines) <= 4
    res = CliRunner().invoke(cli, ["chunk", str(f), "--stats"])
    stats = json.loads(res.stdout)
    assert stats["count"] >= 1 and stats["chunker"] == "markdown"
    big = f.parent / "big.md"
    big.write_text("# Title\n\n" + "A sentence of several words here. " * 300 + "\n")
    res = CliRunner().invoke(cli, ["chunk", str(big), "--chunker", "hierarchical", "--stats"])
    stats = json.loads(res.stdout)  # the parent is over the model's length, by design
    assert stats["over_model_limit"] == 0 and 0 < stats["max_model_tokens"] <= 254
    res = CliRunner().invoke(cli, ["chunk", str(f), "--chunker", "nope"])
    assert res.exit_code == 2 and "unknown chunker 'nope'" in res.output
    blob = f.parent / "blob.md"
    blob.write_bytes(b"# x\n\x00\x01binary")
    res = CliRunner().invoke(cli, ["chunk", str(blob)])  # a bad file is no usage error
    assert res.exit_code == 1 and "blob.md: binary file" in res.output
