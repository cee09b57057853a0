"""The kinds of source, in one table: a kind's name -> the modules that make it.

A source's ``kind`` in the config (default :data:`DEFAULT_KIND`) names an entry of
:data:`SOURCE_KINDS`. An entry (:class:`SourceKind`) names three parts of the kind by
dotted path (``module:attribute``), each imported only when needed, so reading the
table costs nothing:

* ``reader``: the class that reads a source of the kind, constructed as
  ``cls(config, state_dir)``; it satisfies :class:`~ingestd.daemon.sources.base.Source`
  and declares its optional powers (:data:`~ingestd.daemon.sources.base.POWERS`) among
  its bases;
* ``config``: its configuration model, a subclass of
  :class:`~ingestd.daemon.config.models.SourceConfig` (the config validates each
  source with the model its ``kind`` names: a union tagged by ``kind``);
* ``shown``: what ``status`` and ``sources`` show of it
  (:class:`~ingestd.daemon.sources.shown.KindStatus`), in a module that imports
  neither pydantic nor git's machinery (those commands start in tenths of a second).

A new kind of source is its modules plus one entry here.
:func:`~ingestd.daemon.sources.base.reader_class` checks the reader's declared powers
once, when the kind is first loaded.

This module imports nothing of ingestd but the error root, so that every part may
read the table.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ingestd.chunkers.errors import InputError

__all__ = [
    "DEFAULT_KIND",
    "SOURCE_KINDS",
    "SourceKind",
    "UnknownSourceKindError",
    "config_model",
    "load",
    "reader_target",
]

#: The kind of a source whose config names none: a folder on this machine.
DEFAULT_KIND = "local"


@dataclass(frozen=True, slots=True)
class SourceKind:
    """One entry of :data:`SOURCE_KINDS`: a kind's parts, each as ``"module:attribute"``.

    Attributes:
        reader: the class reading a source of the kind.
        config: its configuration model.
        shown: its :class:`~ingestd.daemon.sources.shown.KindStatus` (import-light).
    """

    reader: str
    config: str
    shown: str


#: Kind name -> its parts.
SOURCE_KINDS: dict[str, SourceKind] = {
    "local": SourceKind(
        reader="ingestd.daemon.sources.local:LocalFolder",
        config="ingestd.daemon.sources.local:LocalSourceConfig",
        shown="ingestd.daemon.sources.shown:FOLDER",
    ),
    "git": SourceKind(
        reader="ingestd.daemon.sources.git:GitSource",
        config="ingestd.daemon.sources.gitconfig:GitSourceConfig",
        shown="ingestd.daemon.sources.mirror:GIT_STATUS",
    ),
    "sitemap": SourceKind(
        reader="ingestd.daemon.sources.sitemap.reader:SitemapSource",
        config="ingestd.daemon.sources.sitemap.config:SitemapSourceConfig",
        shown="ingestd.daemon.sources.sitemap.shown:SITEMAP_STATUS",
    ),
}


class UnknownSourceKindError(InputError, ValueError):
    """A source's ``kind`` names no entry of :data:`SOURCE_KINDS`."""


def _entry(kind: str) -> SourceKind:
    try:
        return SOURCE_KINDS[kind]
    except KeyError:
        raise UnknownSourceKindError(
            f"unknown source kind {kind!r}; expected one of: {', '.join(sorted(SOURCE_KINDS))}"
        ) from None


def load(target: str) -> Any:
    """The attribute ``"module:attribute"`` names (its module imported now)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def reader_target(kind: str) -> str:
    """The ``"module:Class"`` of the class reading sources of ``kind``.

    :func:`~ingestd.daemon.sources.base.reader_class` loads it and checks its powers.

    Raises:
        UnknownSourceKindError: ``kind`` is not in :data:`SOURCE_KINDS`.
    """
    return _entry(kind).reader


def config_model(kind: str) -> Any:
    """The configuration model of ``kind`` (a ``SourceConfig`` subclass).

    Raises:
        UnknownSourceKindError: ``kind`` is not in :data:`SOURCE_KINDS`.
    """
    return load(_entry(kind).config)
