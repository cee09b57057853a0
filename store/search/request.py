"""One search request: what ``ingestd search`` is asked, as one record every edge builds.

A search is asked at five edges (the CLI, the MCP tool, :class:`ingestd.daemon.client.Client`,
:class:`ingestd.daemon.client.QueryBuilder`, and the control socket's wire); each builds
one :class:`SearchRequest` and passes it whole to the one search path
(:func:`ingestd.daemon.commands.query.search.answer_request`, or the builder's own Qdrant
query). What a filter means is said once, by the filter record
(:meth:`ingestd.store.search.query.Filters.conditions`, the one translator to the
engine-neutral conditions every engine maps to its own filter).

On the wire a request travels as flat keyword arguments, as it always has:
``query``, ``k``, ``source``, ``path``, ``expand``, ``mode``, ``ranks``, then the other
filters (``version``) and ``budget_tokens``/``per_page`` only when set, so a daemon of
an earlier release that knows none of them still answers a request that uses none.
:meth:`SearchRequest.wire` writes them and :meth:`SearchRequest.from_wire` reads them
back; both walk the filter record's fields, so a new filter of the record travels
without a change here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ingestd.store.search.query import MODES, Filters, Mode

__all__ = ["SearchRequest"]

#: Filters the wire always carries (``None`` when unset), as releases before the record did.
_ALWAYS_SENT = ("source", "path")


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """What a search is asked: the query, how many, how ranked, limited to what.

    Attributes:
        query: the question, in words or identifiers.
        k: number of hits; with ``budget_tokens``, the most passages.
        mode: ``hybrid``, ``dense`` or ``sparse``; ``None``: the config's (or the
            builder's) default.
        filters: what the search is limited to (source, path, version, ...).
        expand: add each hit's parent section.
        ranks: add each hit's rank and score in the dense and the sparse ranking.
        budget_tokens: fill this many tokens (of the index's budget tokenizer) with
            passages; ``None``: hits only.
        per_page: with ``budget_tokens``, most passages of one document.
        strict_version: a ``version`` filter that no source searched holds is an error
            (exit 2) whenever every searched source's versions are known, a source
            without versions (a folder, a site) included: the CLI's usage error.
            ``False`` (the MCP tool, the Python API): an error only when the versioned
            sources searched have all been fetched; otherwise the empty answer has a
            note.
    """

    query: str
    k: int = 5
    mode: Mode | None = None
    filters: Filters = field(default_factory=Filters)
    expand: bool = False
    ranks: bool = False
    budget_tokens: int | None = None
    per_page: int | None = None
    strict_version: bool = False

    def checked_mode(self, default: str) -> Mode:
        """The request's mode, or ``default`` when it names none.

        Raises:
            ValueError: the mode is not one of :data:`~ingestd.store.search.query.MODES`.
        """
        mode = self.mode or default
        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}; expected one of: {', '.join(MODES)}")
        return mode

    def wire(self) -> dict[str, Any]:
        """The request as the control socket carries it (keyword arguments, see the module)."""
        args: dict[str, Any] = {"query": self.query, "k": self.k}
        for f in dataclasses.fields(self.filters):
            value = getattr(self.filters, f.name)
            if value is not None or f.name in _ALWAYS_SENT:
                args[f.name] = value
        args |= {"expand": self.expand, "mode": self.mode, "ranks": self.ranks}
        if self.budget_tokens is not None:
            args["budget_tokens"] = self.budget_tokens
            args["per_page"] = self.per_page
        if self.strict_version:  # sent only when set: a daemon before it takes the rest
            args["strict_version"] = True
        return args

    @classmethod
    def from_wire(
        cls, args: Mapping[str, Any], *, filters: type[Filters] = Filters
    ) -> SearchRequest:
        """The request of the keyword arguments :meth:`wire` writes.

        Args:
            args: the keyword arguments (missing ones take their defaults).
            filters: the filter record whose fields are read from ``args``.

        Raises:
            TypeError: a key that is neither a request field nor a filter (named).
        """
        names = {f.name for f in dataclasses.fields(filters)}
        own = {f.name for f in dataclasses.fields(cls)} - {"filters"}
        unknown = sorted(set(args) - names - own)
        if unknown:
            raise TypeError(f"unknown search argument(s): {', '.join(unknown)}")
        return cls(
            filters=filters(**{k: v for k, v in args.items() if k in names}),
            **{k: v for k, v in args.items() if k in own},
        )
