"""Rule sets to compare with ``ingestd eval``: the configured rules, or rule files.

A rule file is YAML with a ``rules:`` list written as in a config file (first match
wins; the same chunkers and params, checked the same way). Other top-level keys are
ignored, so a whole config file can be given as a rule file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ingestd.daemon.config import (
    Config,
    ConfigError,
    RuleConfig,
    check_rules,
    format_errors,
    read_yaml,
)

__all__ = ["LabeledRules", "load_rule_file", "rule_sets"]


@dataclass(frozen=True)
class LabeledRules:
    """Rules to score: a label for the table and the ordered rules (first match wins).

    Attributes:
        label: the row label (a rule file's stem, or the config's name).
        rules: the rules, as in a config's ``rules:`` list.
    """

    label: str
    rules: tuple[RuleConfig, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (what the daemon is sent)."""
        return {"label": self.label, "rules": [r.model_dump(mode="json") for r in self.rules]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabeledRules:
        """The inverse of :meth:`as_dict`.

        Raises:
            ConfigError: invalid rules.
        """
        label = str(data.get("label", ""))
        return _rule_set(label, {"rules": data.get("rules")}, label)


def _rule_set(label: str, data: Any, where: str) -> LabeledRules:
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list) or not data["rules"]:
        raise ConfigError(
            [f"{where}: expected a mapping with a non-empty `rules:` list, as in a config file"]
        )
    try:
        cfg = Config.model_validate({"rules": data["rules"]})
        check_rules(cfg.rules)
    except ValidationError as exc:
        raise ConfigError([f"{where}: {line}" for line in format_errors(exc)]) from None
    except ConfigError as exc:
        raise ConfigError([f"{where}: {p}" for p in exc.problems]) from None
    return LabeledRules(label, cfg.rules)


def load_rule_file(path: Path, label: str | None = None) -> LabeledRules:
    """Read a rule file: YAML with a ``rules:`` list like the config's.

    Args:
        path: the YAML file.
        label: the row label (default: the file name without its suffix).

    Returns:
        The rule set.

    Raises:
        ConfigError: unreadable file, invalid YAML or invalid rules, each line
            prefixed with the file name (and the line and column for YAML errors).
    """
    raw = read_yaml(Path(path), "rules file")
    return _rule_set(label or Path(path).stem, raw, str(path))


def rule_sets(files: Sequence[Path], cfg: Config, config_path: Path | None) -> list[LabeledRules]:
    """The rule sets to score: one per file, or the configured rules.

    Rows are labelled by file name without suffix (by the path as given when two files
    share a name); the configured rules by the config file's name, or ``default rules``.

    Args:
        files: rule files, in table order; none for the configured rules.
        cfg: the configuration.
        config_path: the config file, if one was given.

    Returns:
        The rule sets, in table order.

    Raises:
        ConfigError: a rule file is invalid.
    """
    if not files:
        return [LabeledRules(Path(config_path).name if config_path else "default rules", cfg.rules)]
    stems = [Path(f).stem for f in files]
    return [
        load_rule_file(f, stem if stems.count(stem) == 1 else str(f))
        for f, stem in zip(files, stems, strict=True)
    ]
