"""A misspelled key of any section of the config names the key it was meant to be.

Before, only a misspelled ``kind`` got ``did you mean git?``; every other unknown key
said ``unknown key; check its spelling against config.example.yaml``, so ``pol_s:``
left the user to find ``poll_s`` in the example. Each key of each section (top level,
every ``ConfigModel`` section, ``rules``, every chunker's ``params``, every source kind)
is misspelled here and must come back with its own name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from ingestd.chunkers.registry import CHUNKERS
from ingestd.daemon.cli import cli
from ingestd.daemon.config import Config, ConfigError, RuleConfig, load_config
from ingestd.daemon.config.base import ConfigModel
from ingestd.daemon.sources.kinds import SOURCE_KINDS, config_model


def typo(key: str) -> str:
    """``key`` with one letter dropped (``poll_s`` -> ``pol_s``)."""
    i = len(key) // 2
    return key[:i] + key[i + 1 :]


def _sections() -> list[tuple[str, type[ConfigModel]]]:
    """The top-level keys whose value is a section of its own model."""
    out = []
    for name, field in Config.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, ConfigModel):
            out.append((name, ann))
    return out


def _cases() -> list[tuple[str, dict[str, Any], str, str]]:
    """(id, config data with one misspelled key, where the line is, the key meant)."""
    cases = [(f"top.{key}", {typo(key): 1}, "", key) for key in sorted(Config.model_fields)]
    for section, model in _sections():
        cases += [
            (f"{section}.{key}", {section: {typo(key): 1}}, f"{section}.", key)
            for key in sorted(model.keys())
        ]
    for key in sorted(RuleConfig.keys()):
        rule = {"match": ["*"], "chunker": "token", typo(key): 1}
        cases.append((f"rules.{key}", {"rules": [rule]}, "rules[0].", key))
    for chunker, cls in sorted(CHUNKERS.items()):
        for key in sorted(cls.Options.model_fields):
            rule = {"match": ["*"], "chunker": chunker, "params": {typo(key): 1}}
            cases.append((f"{chunker}.params.{key}", {"rules": [rule]}, "rules[0].params.", key))
    for kind in sorted(SOURCE_KINDS):
        for key in sorted(config_model(kind).keys() - {"kind"}):
            entry = {"kind": kind, typo(key): 1}
            cases.append((f"{kind}.{key}", {"sources": [entry]}, "sources[0].", key))
    return cases


def _problems(tmp_path: Path, data: dict[str, Any]) -> list[str]:
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    return exc.value.problems


CASES = _cases()


@pytest.mark.parametrize(
    ("data", "where", "key"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_misspelled_key_names_the_key_it_was_meant_to_be(
    tmp_path: Path, data: dict[str, Any], where: str, key: str
) -> None:
    line = f"{where}{typo(key)}: "
    lines = [p for p in _problems(tmp_path, data) if p.startswith(line)]
    assert lines == [f"{line}unknown key; check its spelling (did you mean {key}?)"]


def test_the_sweep_covers_every_section_and_kind() -> None:
    """The cases above reach every section, every source kind and every chunker."""
    names = {c[0].split(".")[0] for c in CASES}
    assert {s for s, _m in _sections()} >= {"embedding", "qdrant", "watch", "search", "files"}
    assert names >= {s for s, _m in _sections()} | set(SOURCE_KINDS) | set(CHUNKERS) | {"rules"}


def test_a_key_near_no_key_names_the_example_and_other_errors_stay(tmp_path: Path) -> None:
    """No suggestion without a near key; the section's other errors are reported too."""
    data = {"watch": {"zzqqxx": 1, "debounce_ms": "soon"}}
    assert _problems(tmp_path, data) == [
        "watch.zzqqxx: unknown key; check its spelling against config.example.yaml",
        "watch.debounce_ms: Input should be a valid integer, unable to parse string as an "
        "integer (got 'soon')",
    ]


def test_a_key_of_another_kind_keeps_its_message(tmp_path: Path) -> None:
    data = {"sources": [{"root": str(tmp_path), "poll_s": 5, "inclde": ["*.md"]}]}
    assert _problems(tmp_path, data) == [
        "sources[0].poll_s: poll_s is a key of kind: git or kind: sitemap sources "
        "(this source is kind: local)",
        "sources[0].inclde: unknown key; check its spelling (did you mean include?)",
    ]


def test_a_misspelled_chunker_names_the_nearest_chunker(tmp_path: Path) -> None:
    data = {"rules": [{"match": ["*"], "chunker": "markdwn"}]}
    (line,) = _problems(tmp_path, data)
    assert line.startswith("rules[0].chunker: unknown chunker 'markdwn'; did you mean markdown? ")


def test_the_cli_prints_the_suggestion_and_exits_2(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("sources:\n  - {kind: git, url: /nowhere.git, pol_s: 60}\n")
    res = CliRunner().invoke(cli, ["resync", "--dry-run", "--config", str(f)])
    assert res.exit_code == 2, res.output
    assert "sources[0].pol_s: unknown key; check its spelling (did you mean poll_s?)" in res.output
