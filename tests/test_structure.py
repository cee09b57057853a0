"""The shape of the ``ingestd`` package: no import cycles, no borrowed privates, small parts.

The import graph is read from the source (``ast``), so it sees every import a reader
sees: module-level ones, imports inside functions (lazy imports), and those under
``if TYPE_CHECKING:``. A cycle between modules, even one that only closes through a
lazy or a type-checking import, means two modules that cannot be understood apart; a
``_private`` name imported from another module is a contract nobody wrote down.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: folder -> the import package it installs as (pyproject's ``package-dir``)
PACKAGES = {"daemon": "ingestd.daemon", "chunkers": "ingestd.chunkers", "store": "ingestd.store"}

MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 450
#: Modules allowed over :data:`MAX_MODULE_LINES`, each with the reason.
LONG_MODULES: dict[str, str] = {}
MAX_FOLDER_MODULES = 12


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool

    def tree(self) -> ast.Module:
        return ast.parse(self.path.read_text(encoding="utf-8"), str(self.path))


def modules() -> dict[str, Module]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            name = ".".join([package, *parts])
            out[name] = Module(name, path, is_package)
    return out


def _target(mod: Module, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.name.split(".")
    if not mod.is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(mod: Module, known: dict[str, Module]) -> Iterator[tuple[str, str | None, int]]:
    """``(module imported, name imported from it or None, line)`` for every import."""
    for node in ast.walk(mod.tree()):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = _target(mod, node)
            if not target.startswith("ingestd"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:  # `from package import module`
                    yield sub, None, node.lineno
                else:
                    yield target, alias.name, node.lineno


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {
        name: {target for target, _, _ in imports(mod, known) if target in known}
        for name, mod in known.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(import_graph()) == []


def test_cycles_close_through_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    src = tmp_path / "z.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ingestd.daemon.x import X\n"
        "def f():\n    from .y import _private\n"
    )
    mod = Module("ingestd.daemon.z", src, False)
    known = {n: mod for n in ("ingestd.daemon.x", "ingestd.daemon.y", "ingestd.daemon.z")}
    assert sorted(imports(mod, known)) == [
        ("ingestd.daemon.x", "X", 3),
        ("ingestd.daemon.y", "_private", 5),
    ]


def part(module: str) -> str:
    """The part of the package a module belongs to: its folder under ``ingestd.<top>``.

    ``ingestd.daemon.sync.writing.writer`` -> ``daemon/sync`` (a subpackage is part of
    its folder); a module directly in a top package is a part of its own
    (``ingestd.daemon.engine`` -> ``daemon/engine``).
    """
    return "/".join(module.split(".")[1:3])


def part_cycle_edges(
    graph: dict[str, set[str]], allowed: Collection[tuple[str, str]] = ()
) -> set[tuple[str, str]]:
    """``(part, module imported)`` for every import in a cycle between parts.

    The ``allowed`` imports are left out first: a cycle they alone close is none.
    """
    graph = {s: {t for t in ts if (part(s), t) not in allowed} for s, ts in graph.items()}
    parts: dict[str, set[str]] = {}
    for source, targets in graph.items():
        parts.setdefault(part(source), set())
        parts[part(source)] |= {part(t) for t in targets if part(t) != part(source)}
    tied = {p: set(c) for c in cycles(parts) for p in c}
    return {
        (part(source), target)
        for source, targets in graph.items()
        for target in targets
        if part(target) != part(source) and part(target) in tied.get(part(source), set())
    }


#: Imports that close a cycle between parts (folders), each with the reason it is not a
#: back-edge of the layering. Any other such import fails: dependencies point from the
#: daemon's front ends (cli, ui, mcpserver, client) through commands, service, the engine
#: and migration to sync, sources and config, then to store and chunkers.
PART_CYCLES: dict[tuple[str, str], str] = {
    ("daemon/config", "ingestd.daemon.sources.kinds"): (
        "the table of source kinds is a leaf that imports nothing of ingestd but the error "
        "root: the config reads it to validate each sources entry with its kind's model, "
        "while those models (in daemon/sources/) extend the config's SourceConfig"
    ),
}


def test_no_import_closes_a_cycle_between_folders_but_the_pinned_ones() -> None:
    """A new back-edge between folders (``evaluation -> cli``, ``commands -> service``,
    ``sync -> migration`` were three) fails here: move the shared name to the lower part,
    or invert the dependency through a parameter.
    """
    graph = import_graph()
    assert sorted(part_cycle_edges(graph, PART_CYCLES)) == []
    pinned = part_cycle_edges(graph)
    assert sorted(set(PART_CYCLES) - pinned) == [], "no cycle closes there: drop it"


def test_cycles_between_folders_are_found_through_their_modules() -> None:
    graph = {
        "ingestd.daemon.a.x": {"ingestd.daemon.b.y", "ingestd.daemon.a.z"},
        "ingestd.daemon.a.z": set(),
        "ingestd.daemon.b.y": {"ingestd.daemon.c"},
        "ingestd.daemon.c": {"ingestd.daemon.a.z", "ingestd.store.s"},
        "ingestd.store.s": set(),
    }
    assert part_cycle_edges(graph) == {
        ("daemon/a", "ingestd.daemon.b.y"),
        ("daemon/b", "ingestd.daemon.c"),
        ("daemon/c", "ingestd.daemon.a.z"),
    }
    assert part_cycle_edges(graph, {("daemon/c", "ingestd.daemon.a.z")}) == set()


def test_no_module_imports_a_private_name_of_another() -> None:
    known = modules()
    borrowed = [
        f"{mod.path.relative_to(ROOT)}:{line}: {name} from {target}"
        for mod in known.values()
        for target, name, line in imports(mod, known)
        if name is not None and name.startswith("_") and not name.startswith("__")
    ]
    assert borrowed == []


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("name", sorted(modules()))
def test_module_is_small(name: str) -> None:
    mod = modules()[name]
    n = _lines(mod.path)
    if name in LONG_MODULES:
        assert n > MAX_MODULE_LINES, f"{name} is {n} lines now: drop it from LONG_MODULES"
        return
    assert n <= MAX_MODULE_LINES, f"{mod.path.relative_to(ROOT)}: {n} lines"


def test_no_class_is_long() -> None:
    long = [
        f"{mod.path.relative_to(ROOT)}: class {node.name}, {node.end_lineno - node.lineno + 1}"
        for mod in modules().values()
        for node in ast.walk(mod.tree())
        if isinstance(node, ast.ClassDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    ]
    assert long == []


def _folders() -> list[Path]:
    return sorted(
        p
        for folder in PACKAGES
        for p in [ROOT / folder, *(ROOT / folder).rglob("*")]
        if p.is_dir() and (p / "__init__.py").is_file()
    )


@pytest.mark.parametrize("folder", [p.relative_to(ROOT).as_posix() for p in _folders()])
def test_no_folder_holds_more_than_twelve_modules(folder: str) -> None:
    """A folder of more modules is read as a list, not as parts: split it into subpackages.

    Counts the modules directly in it (its ``__init__`` aside, subpackages apart).
    Every folder is held to it: there is no list of exceptions.
    """
    n = len([p for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py"])
    assert n <= MAX_FOLDER_MODULES, f"{folder}: {n} modules"


@pytest.mark.parametrize(
    ("folder", "parts"),
    [
        ("daemon/sync", ["healing", "planning", "preparing", "profiles", "state", "writing"]),
        ("daemon/commands", ["index", "query"]),
        ("daemon/cli", ["shared"]),
    ],
)
def test_split_folders_are_made_of_subpackages_that_say_what_they_own(
    folder: str, parts: list[str]
) -> None:
    """``daemon/sync/`` shows the write path, ``daemon/commands/`` what a command does to
    the index, ``daemon/cli/`` its commands beside what they share: each subpackage says
    in its docstring what it owns.
    """
    import importlib

    subs = sorted(p.name for p in (ROOT / folder).iterdir() if (p / "__init__.py").is_file())
    assert subs == parts
    package = PACKAGES[folder.split("/")[0]] + "." + ".".join(folder.split("/")[1:])
    for sub in subs:
        doc = importlib.import_module(f"{package}.{sub}").__doc__ or ""
        assert "Owns" in doc, f"{folder}/{sub}/__init__.py: say what it owns"


def test_store_is_made_of_subpackages_that_name_its_parts() -> None:
    """``store/`` holds no module of its own: the manifest, vectors, embedding, search."""
    loose = sorted(p.name for p in (ROOT / "store").glob("*.py") if p.name != "__init__.py")
    assert loose == []


def test_tests_mirror_the_packages() -> None:
    """Each folder of ``tests/daemon``, ``tests/store`` and ``tests/chunkers`` is a package's."""
    unmirrored = []
    for folder in PACKAGES:
        for sub in sorted((ROOT / "tests" / folder).rglob("*")):
            if sub.is_dir() and sub.name != "__pycache__":
                rel = sub.relative_to(ROOT / "tests")
                if not (ROOT / rel / "__init__.py").is_file():
                    unmirrored.append(rel.as_posix())
    assert unmirrored == []


@pytest.mark.parametrize(
    ("table", "kind"),
    [
        ("ingestd.store.vectors.engines:ENGINES", "engine"),
        ("ingestd.store.embedding.backends:BACKENDS", "embedding backend"),
        ("ingestd.daemon.sources.kinds:SOURCE_KINDS", "source kind"),
    ],
)
def test_each_table_entry_names_one_module_of_its_own(table: str, kind: str) -> None:
    """An engine, a backend or a source kind is one module plus one entry of its table.

    Each entry names a ``module:attribute`` of the package whose module exists (the
    test-only fakes registered through the same tables are in ``tests/``: a fake
    engine, backend and source kind pass the store and sync suites). A source kind's
    entry names three: its reader, its config model and its status part.
    """
    import importlib

    module, _, attr = table.partition(":")
    entries = getattr(importlib.import_module(module), attr)
    known = modules()
    for name, entry in entries.items():
        targets = [entry] if isinstance(entry, str) else [entry.reader, entry.config, entry.shown]
        for target in targets:
            where, _, what = target.partition(":")
            assert where in known, f"{kind} {name!r}: {where} is not a module of ingestd"
            assert what, f"{kind} {name!r}: {target} names no attribute"


def _server_url_reads(tree: ast.Module) -> list[int]:
    """Lines reading the config's server URL.

    ``<x>.qdrant.url``, or ``q.url`` in a function where ``q = <x>.qdrant``.
    """
    lines = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        sections = {
            target.id
            for node in ast.walk(func)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "qdrant"
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(func):
            if not isinstance(node, ast.Attribute) or node.attr != "url":
                continue
            owner = node.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "qdrant") or (
                isinstance(owner, ast.Name) and owner.id in sections
            ):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_only_the_store_reads_the_server_url() -> None:
    """Whether vectors are on a server is the engines' table's answer, read nowhere else.

    ``ingestd.store.vectors.engines`` (:func:`embedded`, :func:`placed_engine`,
    :func:`open_store`) reads ``qdrant.url`` through the server's engine spec; a test
    of the URL outside ``store/`` would decide the store beside the table again.
    """
    reads = [
        f"{mod.path.relative_to(ROOT)}:{line}"
        for mod in modules().values()
        if not mod.name.startswith("ingestd.store.")
        for line in _server_url_reads(mod.tree())
    ]
    assert reads == []


def test_server_url_reads_are_found_directly_and_through_a_name() -> None:
    tree = ast.parse(
        "def f(cfg):\n    if cfg.qdrant.url:\n        pass\n"
        "def g(self):\n    q = self.cfg.qdrant\n    return q.url, q.engine, cfg.manifest.url\n"
    )
    assert _server_url_reads(tree) == [2, 6]


def test_each_source_kind_declares_its_config_and_powers_in_modules_of_its_own() -> None:
    """A source kind's config model and powers are its own modules', found through the table.

    For each entry of ``SOURCE_KINDS``: its config model subclasses ``SourceConfig``
    in a module that no other kind's entry names (not the shared config module), and
    its ``kind`` defaults to the kind's name; its reader's powers are declared among its
    bases and each power's methods are defined in the reader's module (the table's load
    check refuses a power had but not declared); its status part has every method of
    ``KindStatus``.
    """
    from ingestd.daemon.config.models import SourceConfig
    from ingestd.daemon.sources import kinds
    from ingestd.daemon.sources.base import POWERS, reader_class
    from ingestd.daemon.sources.shown import KindStatus

    def module(target: str) -> str:
        return target.partition(":")[0]

    status_methods = [n for n, v in vars(KindStatus).items() if callable(v) and n[0] != "_"]
    assert set(kinds.SOURCE_KINDS) >= {"local", "git", "sitemap"}
    for name, entry in kinds.SOURCE_KINDS.items():
        others = {
            module(t)
            for k, e in kinds.SOURCE_KINDS.items()
            if k != name
            for t in (e.reader, e.config)
        }
        model = kinds.config_model(name)
        assert issubclass(model, SourceConfig) and model is not SourceConfig, name
        assert model.__module__ == module(entry.config) not in others, name
        assert model.model_fields["kind"].default == name
        reader = reader_class(name)  # its powers checked against its declaration
        assert reader.__module__ == module(entry.reader) not in others, name
        for power in POWERS:
            if power in reader.__mro__:
                methods = [n for n, v in vars(power).items() if callable(v) and n[0] != "_"]
                where = {
                    n: next(k for k in reader.__mro__ if n in vars(k)).__module__ for n in methods
                }
                assert set(where.values()) == {reader.__module__}, (name, power, where)
        shown = kinds.load(entry.shown)
        assert all(callable(getattr(shown, n, None)) for n in status_methods), name
    powers = {
        name: {p.__name__ for p in POWERS if p in reader_class(name).__mro__}
        for name in ("local", "git", "sitemap")
    }
    assert powers == {"local": set(), "git": {"Fetched", "Versioned"}, "sitemap": {"Fetched"}}


def test_status_parts_of_source_kinds_import_no_pydantic() -> None:
    """``status`` and ``sources`` ask each kind's status part without the config's machinery."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from ingestd.daemon.sources.kinds import SOURCE_KINDS, load\n"
        "for kind in SOURCE_KINDS.values(): load(kind.shown)\n"
        "print(sorted(m for m in ('pydantic', 'yaml', 'httpx', 'ingestd.daemon.sources.gitcmd')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_source_power_is_probed_with_getattr() -> None:
    """A source's powers are asked with ``isinstance`` of their Protocol, not ``getattr``."""
    from ingestd.daemon.sources.base import POWERS

    names = {n for p in POWERS for n, v in vars(p).items() if callable(v) and n[0] != "_"}
    names |= {"versioned"}
    found = []
    for mod in modules().values():
        for node in ast.walk(mod.tree()):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in names
            ):
                found.append(f"{mod.name}:{node.lineno} {node.args[1].value}")
    assert found == []
