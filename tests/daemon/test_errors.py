"""One root for every known failure; one line and an exit code by class, not by name.

The tree drawn in :mod:`ingestd.daemon.errors` is read back and compared with the
classes, so the drawing cannot drift; every exception class in the source is either in
the tree or named below as never reaching a user.
"""

from __future__ import annotations

import ast
import importlib
import re
import sqlite3
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ingestd.chunkers.errors import IngestdError
from ingestd.daemon import errors
from ingestd.daemon.cli.shared.errors import handle_errors
from ingestd.daemon.client.errors import one_line
from tests.test_structure import PACKAGES, ROOT

#: Exceptions outside the tree, and why.
NOT_IN_TREE = {
    "ingestd.daemon.sync.types.SyncInterrupted": "a stop requested, ends work at a checkpoint",
    "ingestd.daemon.sync.types.UnreadableFile": "a file to retry later, never a failure",
    "ingestd.daemon.evaluation.evaluate.EvalCancelled": "becomes DaemonError 130",
    "ingestd.daemon.migration.migrate.MigrationAborted": "ends a migration build",
    "ingestd.chunkers.sizing.pieces._LongWord": "a signal inside the word counter",
    "ingestd.chunkers.markup.jsx.NotMdx": "bad MDX inside the scanner: read as markdown",
    "ingestd.store.vectors.edge.edge_guard.EngineError": "an engine panic: unexpected",
    "ingestd.store.vectors.base.StoreReadOnlyError": "a reader's code path that writes: a bug",
    "ingestd.daemon.cli.shared.errors.Fatal": "the CLI's rendering of a known failure",
    "ingestd.daemon.sources.beneath.OutsideRootError": "a link on the way: no document there",
    "ingestd.store.embedding.remote_backend._Transient": "a retry signal inside the embedder",
    "ingestd.daemon.sources.sitemap.client._Transient": "a retry signal inside a site's client",
    "ingestd.daemon.sources.sitemap.parse.SitemapFormatError": "becomes SiteError",
}

_LINE = re.compile(r"^    (?P<indent>(?:[│ ]   )*)(?:[├└]── )?(?P<name>[A-Z]\w+)(?P<rest>.*)$")


def _drawn() -> list[tuple[str, str | None, str]]:
    """``(class, parent or None, the rest of its line)`` for each line of the drawn tree."""
    doc = errors.__doc__ or ""
    block = doc.split("where each is defined on the right)::\n\n", 1)[1].split("\n\n", 1)[0]
    out: list[tuple[str, str | None, str]] = []
    parents: list[str] = []
    for line in block.splitlines():
        m = _LINE.match(line)
        assert m, line
        depth = len(m["indent"]) // 4 + (0 if line.startswith("    I") else 1)
        parents = parents[:depth]
        out.append((m["name"], parents[-1] if parents else None, m["rest"]))
        parents.append(m["name"])
    return out


def test_every_error_of_the_tree_derives_from_the_root() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, IngestdError), name
        assert issubclass(cls, Exception) and not issubclass(cls, click.ClickException)


def test_the_drawn_tree_is_the_class_tree() -> None:
    drawn = _drawn()
    assert sorted(name for name, _, _ in drawn) == sorted(errors.__all__)
    for name, parent, rest in drawn:
        cls = getattr(errors, name)
        if parent is None:
            assert cls is IngestdError
            continue
        assert getattr(errors, parent) in cls.__bases__, f"{name} is drawn under {parent}"
        words = rest.split()
        if words and words[-1].startswith(("chunkers.", "store.", "daemon.")):
            assert cls.__module__ == f"ingestd.{words[-1]}", name
        for builtin in (ValueError, RuntimeError, OSError):
            assert (builtin.__name__ in words) == (builtin in cls.__bases__), (name, builtin)
        if "exit" in words and words[words.index("exit") + 1].isdigit():
            assert cls.exit_code == int(words[words.index("exit") + 1]), name


def _exception_classes() -> list[str]:
    """``module.Class`` of every class in the source that derives from an exception."""
    found = []
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            module = ".".join([package, *[p for p in parts if p != "__init__"]])
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and any(
                    re.search(r"(Error|Exception|NoDaemon|Timeout)$", ast.unparse(b))
                    for b in node.bases
                ):
                    found.append(f"{module}.{node.name}")
    return found


def test_every_exception_class_is_in_the_tree_or_never_reaches_a_user() -> None:
    in_tree = {f"{getattr(errors, n).__module__}.{n}" for n in errors.__all__}
    classes = set(_exception_classes())
    assert classes - in_tree - set(NOT_IN_TREE) == set(), "add them to the tree, or NOT_IN_TREE"
    assert classes == in_tree | set(NOT_IN_TREE)
    for qualname in sorted(classes):
        module, name = qualname.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, BaseException), qualname
        assert issubclass(cls, IngestdError) == (qualname in in_tree), qualname


def _raising(exc: BaseException) -> click.Command:
    @click.command()
    @handle_errors
    def fails() -> None:
        raise exc

    return fails


def _cases() -> list[tuple[BaseException, str | None, int]]:
    """``(error, its one line or None, the CLI's exit code)``."""
    from ingestd.daemon.config import ConfigError
    from ingestd.daemon.sync.types import SyncInterrupted
    from ingestd.store.common.damage import StateDamagedError
    from ingestd.store.embedding.embedder import ModelNotFoundError

    return [
        (ConfigError(["rules[0].chunker: unknown", "log_level: bad"]), "rules[0]", 2),
        (errors.DaemonError("unknown source: x;\n known: docs", 2), "unknown source: x;", 2),
        (errors.DaemonError("evaluation cancelled", 130), "evaluation cancelled", 130),
        (errors.SyncTimeout("sync did not finish within 1 s"), "sync did not finish", 1),
        (errors.NoDaemon("no ingestd daemon answers on /x.sock"), "no ingestd daemon", 1),
        (errors.StateLockedError("state dir s is in use"), "state dir s is in use", 1),
        (ModelNotFoundError("no model named m"), "no model named m", 1),
        (StateDamagedError(Path("m.db"), "manifest", "not a db"), "the manifest m.db", 1),
        (RuntimeError("a bug"), None, 3),
        (SyncInterrupted("stop requested"), None, 3),
        (sqlite3.OperationalError("database or disk is full"), "no space left", 1),
    ]


@pytest.mark.parametrize(("exc", "line", "code"), _cases(), ids=lambda c: type(c).__name__)
def test_one_line_and_the_exit_code_come_from_the_class(
    exc: BaseException, line: str | None, code: int
) -> None:
    said = one_line(exc, Path("/var/lib/ingestd"))
    if line is None:
        assert said is None
    else:
        assert said is not None and said.startswith(line) and "\n" not in said
    res = CliRunner().invoke(_raising(exc), [])
    assert res.exit_code == code, res.output
    if line is None:
        assert f"unexpected error: {type(exc).__name__}" in res.output
    else:
        assert f"Error: {line}" in res.output
        if isinstance(exc, IngestdError):
            assert str(exc) in res.output  # the CLI prints the message as it is


def test_a_damaged_file_is_named_with_the_command_that_rebuilds_it() -> None:
    from ingestd.store.common.damage import StateDamagedError

    exc = StateDamagedError(Path("s/manifest.db"), "manifest", "file is not a database")
    assert one_line(exc, Path("s")) == (
        "the manifest s/manifest.db is damaged (file is not a database); "
        "`ingestd resync --rebuild --state-dir s` rebuilds it"
    )
    res = CliRunner().invoke(_raising(exc), [])
    assert res.exit_code == 1
    assert "`ingestd resync --rebuild` rebuilds it" in res.output


def test_the_builtin_bases_still_catch_them() -> None:
    from ingestd.daemon.config import ConfigError

    with pytest.raises(ValueError):
        raise ConfigError(["x: bad"])
    with pytest.raises(RuntimeError):
        raise errors.StateLockedError("held")
    with pytest.raises(OSError):
        raise errors.InsecureDirError("open to all")
