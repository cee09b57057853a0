"""The table of engines, and which one holds a state dir's vectors.

:data:`ENGINES` maps each engine's name to the ``module:attribute`` of its spec (an
:class:`~ingestd.store.vectors.spec.EngineSpec`), imported when first asked for, as
uvicorn's ``config.py`` maps a loop or protocol name to its implementation. Config
validation, the state dir, damage handling, migration costs, the command line and the
sync engine's resources all read it. The engines today:

* ``edge``: Qdrant Edge, Qdrant's own engine in-process (the default for a new store);
* ``local``: qdrant-client's local mode, a pure-Python engine (the fallback where
  Qdrant Edge is not installed, and the engine of stores made before it);
* ``server``: a Qdrant server or cluster, no embedded engine
  (:attr:`~ingestd.store.vectors.spec.EngineSpec.embedded` is ``False``): the settings
  select it outright (``qdrant.url``), and it keeps nothing in the state dir.

Which engine the settings and the state dir's files give is :func:`placed_engine`;
:func:`open_store` opens it, :func:`embedded` tells whether it lives in the state dir.
Nothing outside ``store/`` reads ``qdrant.url`` itself.

A store made with one engine keeps working with it; configuring another moves its
collections, one collection-version build each
(:class:`~ingestd.store.vectors.switch.EngineSwitch`). Telling the engines apart reads a
few small files and imports no engine.

**A new engine** is one module exporting a spec (its store class beside it or in a
sibling module, imported only by :meth:`~ingestd.store.vectors.spec.EngineSpec.open`
or :meth:`~ingestd.store.vectors.spec.EngineSpec.connect`) plus one entry here. The
table's order is the preference for a new store: the first embedded engine installed
is chosen.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ingestd.store.common.damage import StateDamagedError
from ingestd.store.vectors.base import StoreUnavailableError
from ingestd.store.vectors.spec import EngineSpec, StoreSettings

if TYPE_CHECKING:
    from ingestd.store.vectors.base import VectorStore

__all__ = [
    "ENGINES",
    "choose_engine",
    "engine_names",
    "engine_spec",
    "embedded",
    "engine_specs",
    "files_damage",
    "missing_library",
    "open_embedded",
    "open_store",
    "placed_engine",
]

#: Engine name -> ``module:attribute`` of its :class:`EngineSpec` (light modules).
ENGINES: dict[str, str] = {
    "edge": "ingestd.store.vectors.edge.edge_engine:SPEC",
    "local": "ingestd.store.vectors.client.local_engine:SPEC",
    "server": "ingestd.store.vectors.client.server_engine:SPEC",
}


def engine_names() -> tuple[str, ...]:
    """The embedded engines' names, in the table's order (the preferred first)."""
    return tuple(spec.name for spec in engine_specs())


def engine_spec(name: str) -> EngineSpec:
    """The spec of engine ``name``, its light module imported on first use.

    Raises:
        ValueError: no engine of that name (the message lists the engines).
    """
    target = ENGINES.get(name)
    if target is None:
        raise ValueError(
            f"unknown embedded engine {name!r}; expected one of: {', '.join(engine_names())}"
        )
    return _load(name, target)


def _load(name: str, target: str) -> EngineSpec:
    module, _, attr = target.partition(":")
    spec = getattr(importlib.import_module(module), attr)
    if not isinstance(spec, EngineSpec) or spec.name != name:
        raise TypeError(f"{target} is not the EngineSpec of engine {name!r}")
    return spec


def engine_specs() -> list[EngineSpec]:
    """Every embedded engine's spec, in the table's order."""
    specs = (_load(name, target) for name, target in ENGINES.items())
    return [spec for spec in specs if spec.embedded]


def _selected(settings: StoreSettings) -> EngineSpec | None:
    """The spec of the engine ``settings`` select outright (a server), or ``None``."""
    for name, target in ENGINES.items():
        spec = _load(name, target)
        if not spec.embedded and spec.selected(settings):
            return spec
    return None


def embedded(settings: StoreSettings) -> bool:
    """Whether the store ``settings`` configure lives in the state dir (an embedded engine).

    ``False`` when they select an engine outright (a Qdrant server by its URL): then no
    folder of the state dir holds vectors, nothing owns the store, and other state
    dirs may share its collections.
    """
    return _selected(settings) is None


def placed_engine(settings: StoreSettings, folders: Mapping[str, Path]) -> tuple[str, str | None]:
    """The engine holding the vectors, and another one while it still holds collections.

    The engine ``settings`` select outright (``("server", None)`` for a URL), else
    :func:`choose_engine` from ``settings.engine`` and the engines' folders.
    """
    spec = _selected(settings)
    if spec is not None:
        return spec.name, None
    return choose_engine(settings.engine, folders)


def open_store(
    settings: StoreSettings, folders: Mapping[str, Path], *, read_only: bool = False
) -> VectorStore:
    """Open the store ``settings`` configure: the server they select, else the embedded one.

    Args:
        settings: the config's ``qdrant`` section.
        folders: each embedded engine's folder (unused for a server).
        read_only: a reader's store.

    Raises:
        ingestd.store.vectors.base.StoreUnavailableError: see :func:`open_embedded`.
        ingestd.store.common.damage.StateDamagedError: see :func:`open_embedded`.
    """
    spec = _selected(settings)
    if spec is not None:
        return spec.connect(settings, read_only=read_only)
    return open_embedded(settings.engine, folders, read_only=read_only)


def missing_library(settings: StoreSettings, folders: Mapping[str, Path]) -> str | None:
    """Why the store ``settings`` configure cannot be opened here: its library is missing.

    What opening would refuse first (:func:`open_store`), found without importing or
    opening anything: a dry run and ``status`` say it before a real run fails on it.

    Returns:
        One line naming the engine, the library and how to install it, or ``None``.

    Raises:
        ValueError: ``settings.engine`` names no engine.
    """
    name, _previous = placed_engine(settings, folders)
    spec = engine_spec(name)
    if spec.installed():
        return None
    where = f"a Qdrant server ({settings.url})" if not spec.embedded else f"qdrant.engine {name}"
    return f"{where} needs {spec.package}, which is not installed ({spec.install_hint})"


def choose_engine(configured: str | None, folders: Mapping[str, Path]) -> tuple[str, str | None]:
    """The engine to use, and another one while it still holds collections.

    Args:
        configured: ``qdrant.engine``; ``None``: the first engine (in the table's
            order) whose folder holds a store, else the first one installed.
        folders: each engine's folder (``StatePaths.engine_folders()``).

    Returns:
        ``(engine, previous)``; ``previous`` is the first other engine whose folder
        holds collections (they are to move to ``engine``), or ``None``.

    Raises:
        ValueError: ``configured`` names no engine.
    """
    specs = engine_specs()
    if configured is None:
        held = (s.name for s in specs if s.holds_store(folders[s.name]))
        installed = (s.name for s in specs if s.installed())
        configured = next(held, None) or next(installed, specs[0].name)
    engine_spec(configured)
    previous = next(
        (s.name for s in specs if s.name != configured and s.holds_collections(folders[s.name])),
        None,
    )
    return configured, previous


def open_embedded(
    configured: str | None, folders: Mapping[str, Path], *, read_only: bool = False
) -> VectorStore:
    """Open the embedded store: one engine, or two while collections move.

    Args:
        configured: ``qdrant.engine`` (see :func:`choose_engine`).
        folders: each engine's folder.
        read_only: a reader's store (see :meth:`EngineSpec.open`).

    Raises:
        ingestd.store.vectors.base.StoreUnavailableError: a store is in use by another
            process, or its engine is not installed.
        ingestd.store.common.damage.StateDamagedError: a store's files are damaged.
        Exception: what opening raised when it is no sign of damage.
    """
    engine, previous = choose_engine(configured, folders)
    store = _open(engine_spec(engine), folders[engine], read_only)
    if previous is None:
        return store
    from ingestd.store.vectors.switch import EngineSwitch

    try:
        old = _open(engine_spec(previous), folders[previous], read_only)
    except BaseException:
        store.close()
        raise
    return EngineSwitch(store, old, folders[previous])


def _open(spec: EngineSpec, folder: Path, read_only: bool = False) -> VectorStore:
    """``spec.open(folder)``; an error that says the files are damaged comes out as such.

    Raises:
        ingestd.store.vectors.base.StoreUnavailableError: the engine is not installed (the
            message says how to install it), or another process holds the store.
        ingestd.store.common.damage.StateDamagedError: the store's files are damaged.
    """
    if not spec.installed():
        raise StoreUnavailableError(
            f"qdrant.engine is {spec.name} but its library ({spec.package}) is not "
            f"installed ({spec.install_hint})"
        )
    try:
        return spec.open(folder, read_only=read_only)
    except (StoreUnavailableError, StateDamagedError):
        raise
    except Exception as exc:
        damage = spec.open_damage(folder, exc)
        if damage is None:
            raise
        raise damage from exc


def files_damage(folders: Mapping[str, Path]) -> StateDamagedError | None:
    """The first damage found in the files of any engine's store, or ``None``.

    Reads files, opens nothing (see :meth:`EngineSpec.files_damage`): ``ingestd status``
    says when the store that ``search``, ``resync``, ``verify`` and ``run`` would fail
    to open is damaged.

    Args:
        folders: each engine's folder; a missing folder holds no damage.
    """
    for spec in engine_specs():
        folder = folders[spec.name]
        if folder.is_dir():
            damage = spec.files_damage(folder)
            if damage is not None:
                return damage
    return None
