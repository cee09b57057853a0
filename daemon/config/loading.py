"""Loading the configuration: the YAML file, paths made absolute, readable errors.

:func:`load_config` turns a ``ValidationError`` into :class:`ConfigError` lines of the
form ``rules[2].params.max_tokens: Input should be greater than 0 (got -1)``.

The state dir is resolved by :func:`resolve_state_dir` (from
:mod:`~ingestd.daemon.statedir`, which fast commands use without this module):
``--state-dir``, else
``$INGESTD_STATE_DIR``, else the config file's ``state_dir``, else systemd's
``$STATE_DIRECTORY``, else ``$XDG_STATE_HOME/ingestd`` (``~/.local/state/ingestd``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ingestd.daemon.config.base import did_you_mean, known_keys_only
from ingestd.daemon.config.models import Config, ConfigError, RuleConfig, SourceConfig
from ingestd.daemon.readfile import read_file
from ingestd.daemon.sources.kinds import DEFAULT_KIND, config_model

__all__ = [
    "SYSTEM_ROOTS",
    "SYSTEM_TREES",
    "check_rules",
    "format_errors",
    "load_config",
    "overlap_problems",
    "read_yaml",
    "system_root_problem",
]


def check_rules(rules: Sequence[RuleConfig]) -> None:
    """Check each rule's chunker name and ``params`` against that chunker's options.

    Raises:
        ConfigError: one ``rules[i].params.key: problem`` line per mistake.
    """
    from pydantic import ValidationError as VE

    from ingestd.chunkers.registry import CHUNKERS

    problems: list[str] = []
    for i, rule in enumerate(rules):
        cls = CHUNKERS.get(rule.chunker)
        if cls is None:
            problems.append(
                f"rules[{i}].chunker: unknown chunker {rule.chunker!r}; "
                f"{did_you_mean(rule.chunker, CHUNKERS)}"
                f"expected one of: {', '.join(sorted(CHUNKERS))}"
            )
            continue
        options = cls.Options
        try:
            known_keys_only(
                dict(rule.params), options.model_fields, options.model_validate, options.__name__
            )
        except VE as exc:
            problems.extend(format_errors(exc, f"rules[{i}].params"))
    if problems:
        raise ConfigError(problems)


def _format_loc(loc: Sequence[int | str], prefix: str = "") -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


#: Errors whose message needs no ``(got ...)``: the value is not the fault, or is named.
_NO_VALUE_SHOWN = ("missing", "extra_forbidden", "foreign_key", "unknown_kind", "unknown_key")


def format_errors(exc: ValidationError, prefix: str = "") -> list[str]:
    """One ``key.path: problem`` line per error of ``exc``, keys under ``prefix``."""
    lines = []
    for err in exc.errors():
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key; check its spelling against config.example.yaml"
        elif err["type"] == "missing":
            msg = "required key is missing"
        got = err.get("input")
        if err["type"] not in _NO_VALUE_SHOWN and not isinstance(got, dict | list):
            msg += f" (got {got!r})"
        lines.append(f"{_format_loc(loc, prefix)}: {msg}")
    return lines


#: Folders that are never documentation trees, refused as source roots with everything
#: below them: virtual file systems (reading them fails or never ends) and the system's
#: private configuration and boot files. ``/dev/shm``, a tmpfs of ordinary files, is not
#: one of them.
SYSTEM_TREES: tuple[str, ...] = ("/proc", "/sys", "/dev", "/run", "/boot", "/etc")
#: Folders refused as source roots themselves (the whole file system, or a system tree
#: of programs and their data), though a folder below them may be one (``/usr/share/doc``).
SYSTEM_ROOTS: tuple[str, ...] = (
    "/", "/usr", "/usr/local", "/var", "/var/lib", "/bin", "/sbin", "/lib", "/lib32",
    "/lib64", "/libx32",
)  # fmt: skip


def system_root_problem(root: Path) -> str | None:
    """Why canonical ``root`` cannot be a source root (a system tree), or ``None``."""
    posix = root.as_posix()
    if posix == "/":
        return (
            "/ is the whole file system (system trees, secrets, other users' files); "
            "choose the folder that holds the documents"
        )
    if posix == "/dev/shm" or posix.startswith("/dev/shm/"):
        return None
    for tree in SYSTEM_TREES:
        if posix == tree or posix.startswith(tree + "/"):
            return (
                f"{posix} is in the system tree {tree}, which holds no documentation; "
                "choose the folder that holds the documents"
            )
    if posix in SYSTEM_ROOTS:
        return (
            f"{posix} is a system tree of programs and their data; "
            "choose the folder that holds the documents (e.g. /usr/share/doc/NAME)"
        )
    return None


def overlap_problems(labelled: Sequence[tuple[str | None, SourceConfig]]) -> list[str]:
    """Sources whose roots overlap, so that files would be indexed once per source.

    Two sources may not share a root, and a root inside another source's root is
    allowed only when that outer source excludes it (an ``exclude`` glob matching the
    inner root's folder, or a folder above it): otherwise every file below it is
    indexed twice, and a search returns each chunk twice.

    Args:
        labelled: ``(key, source)`` pairs with canonical roots; ``key`` names a
            configured source in the message (``sources[1]``), ``None`` a ``PATH``.

    Returns:
        One line per overlapping pair (empty: none).
    """
    import pathspec

    def where(key: str | None, s: SourceConfig) -> str:
        return f"{key}.root" if key else f"PATH {s.root}"

    def which(key: str | None, s: SourceConfig) -> str:
        return f"{key} (source {s.name!r})" if key else "another PATH"

    problems = []
    for i, (ka, a) in enumerate(labelled):
        for kb, b in labelled[i + 1 :]:
            if a.root == b.root:
                problems.append(
                    f"{where(kb, b)}: {b.root} is also the root of {which(ka, a)}: every "
                    "file there would be indexed once per source; keep one source (its "
                    "include globs can list every kind of file)"
                )
                continue
            if a.root in b.root.parents:
                (ko, outer), (ki, inner) = (ka, a), (kb, b)
            elif b.root in a.root.parents:
                (ko, outer), (ki, inner) = (kb, b), (ka, a)
            else:
                continue
            rel = inner.root.relative_to(outer.root).as_posix()
            spec = pathspec.GitIgnoreSpec.from_lines(outer.exclude)
            parts = rel.split("/")
            if any(spec.match_file("/".join(parts[: n + 1]) + "/") for n in range(len(parts))):
                continue  # the outer source never enters the inner root
            fix = (
                f"add '{rel}/' to {ko}.exclude, or remove one of the two sources"
                if ko
                else "give only one of the two folders"
            )
            problems.append(
                f"{where(ki, inner)}: {inner.root} is inside {outer.root}, the root of "
                f"{which(ko, outer)}: every file below it would be indexed twice; {fix}"
            )
    return problems


def _canonical(root: Path) -> Path:
    return Path(os.path.realpath(root.expanduser()))


def read_yaml(path: Path, what: str) -> Any:
    """The YAML document in a file, as ``yaml.safe_load`` gives it (``None``: empty).

    Args:
        path: the UTF-8 file.
        what: what the file is, for the error (``config file``, ``rules file``).

    Raises:
        ConfigError: one line: ``<path>: cannot read the <what>: <reason>``, or
            ``<path>:<line>:<column>: invalid YAML: <problem>`` (counted from 1).
    """
    try:
        return yaml.safe_load(read_file(path).decode("utf-8"))
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the {what}: {exc.strerror}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: invalid YAML: {problem}"]) from None


def load_config(
    path: str | Path | None = None,
    *,
    roots: Sequence[str | Path] = (),
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Load and validate the configuration.

    Args:
        path: YAML file, or ``None`` for the defaults.
        roots: folders given as ``PATH`` arguments. With a config file they select its
            sources whose root is one of them, or add a default source for each one
            that is not configured; without a file each becomes a default source.
        overrides: top-level keys to set before validation (e.g. from CLI flags).

    A configured root that does not exist is no error: it is a state (an unmounted
    volume) that every command reports, and nothing of that source is synced or
    deleted until it is back. A root that is a file is an error.

    Returns:
        The validated config with source roots made absolute and names filled in.

    Raises:
        ConfigError: unreadable YAML or invalid values (one ``key.path: problem`` per line).
    """
    data: dict[str, Any] = {}
    base = Path.cwd()
    if path is not None:
        p = Path(path)
        raw = read_yaml(p, "config file")
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(["(top level): expected a mapping of keys (state_dir, sources, ...)"])
        data = raw
        base = p.resolve().parent
    if overrides:
        data = {**data, **overrides}
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(exc)) from None
    check_rules(cfg.rules)
    return _finish(cfg, base, roots)


def _local_indexes(cfg: Config) -> list[int]:
    """Indexes of the configured sources whose documents are a folder on this machine."""
    return [i for i, s in enumerate(cfg.sources) if s.has_root]


def _finish(cfg: Config, base: Path, roots: Sequence[str | Path]) -> Config:
    sources: list[SourceConfig] = []
    repos: list[SourceConfig] = []  # sources with no root on this machine (git repositories)
    for s in cfg.sources:
        (sources if s.has_root else repos).append(s.resolved(base))
    # configured roots -> their index in the config's list
    index = {s.root: i for i, s in zip(_local_indexes(cfg), sources, strict=True)}
    labelled: list[tuple[str | None, SourceConfig]] = [
        (f"sources[{i}]", s) for i, s in zip(_local_indexes(cfg), sources, strict=True)
    ]
    if roots:
        repos = []
        wanted = [_canonical(Path(r)) for r in roots]
        chosen = [s for s in sources if s.root in wanted]
        for r in wanted:
            if not any(s.root == r for s in chosen):
                chosen.append(config_model(DEFAULT_KIND)(name=str(r), root=r))
                labelled.append((None, chosen[-1]))
        sources = chosen
    problems: list[str] = []  # a root's own problem first: overlaps are judged among the valid ones
    refused: set[Path] = set()
    for s in sources:
        where = f"sources[{index[s.root]}].root" if s.root in index else f"PATH {s.root}"
        problem = system_root_problem(s.root)
        if problem is None and os.path.exists(s.root) and not os.path.isdir(s.root):
            problem = f"{s.root} is a file; a source root is the folder that holds the documents"
        if problem is not None:
            problems.append(f"{where}: {problem}")
            refused.add(s.root)
    problems += overlap_problems([(w, s) for w, s in labelled if s.root not in refused])
    if problems:
        raise ConfigError(problems)
    if repos:  # in the configured order
        order = {s.name: i for i, s in enumerate(cfg.sources)}
        sources = sorted([*sources, *repos], key=lambda s: order.get(s.name, len(order)))
    state = cfg.state_dir
    if state is not None and not state.is_absolute():
        state = Path(os.path.normpath(base / state))  # ``../state`` shown as it is meant
    embedding = cfg.embedding
    if embedding.cache_dir is not None:
        cache_dir = embedding.cache_dir.expanduser()
        embedding = embedding.model_copy(
            update={"cache_dir": cache_dir if cache_dir.is_absolute() else base / cache_dir}
        )
    return cfg.model_copy(
        update={"sources": tuple(sources), "state_dir": state, "embedding": embedding}
    )
