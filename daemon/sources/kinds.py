"""The kinds of source, in one table: a kind's name -> the class that reads it.

A source's ``kind`` in the config (default ``local``) names an entry of
:data:`SOURCE_KINDS`. An entry is the dotted path of a class (``module:Class``)
imported only when a source of its kind is opened, so reading the table costs
nothing (the config reads it to validate ``kind``). A new kind of source is one
module with its class plus one entry here; the class is constructed as
``cls(config, state_dir)`` and must satisfy :class:`~ingestd.daemon.sources.base.Source`
(:func:`~ingestd.daemon.sources.base.open_source` builds it).

This module imports nothing of ingestd but the error root, so that every part may
read the table.
"""

from __future__ import annotations

import importlib
from typing import Any

from ingestd.chunkers.errors import InputError

__all__ = ["SOURCE_KINDS", "UnknownSourceKindError", "source_class"]

#: Kind name -> ``"module:Class"`` of the class that reads a source of that kind.
SOURCE_KINDS: dict[str, str] = {
    "local": "ingestd.daemon.sources.local:LocalFolder",
    "git": "ingestd.daemon.sources.git:GitSource",
}


class UnknownSourceKindError(InputError, ValueError):
    """A source's ``kind`` names no entry of :data:`SOURCE_KINDS`."""


def source_class(kind: str) -> Any:
    """The class that reads sources of ``kind`` (its module imported now).

    Raises:
        UnknownSourceKindError: ``kind`` is not in :data:`SOURCE_KINDS` (the message
            lists the kinds).
    """
    try:
        target = SOURCE_KINDS[kind]
    except KeyError:
        raise UnknownSourceKindError(
            f"unknown source kind {kind!r}; expected one of: {', '.join(sorted(SOURCE_KINDS))}"
        ) from None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
