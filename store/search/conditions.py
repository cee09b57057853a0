"""What a filter means, said once and engine-neutral: the conditions engines translate.

A search, a scroll of one source or a count of some sources is limited by a
:class:`Conditions`: payload matches that must all hold, and boolean payload keys that
must not be set. Which conditions a search has (its source, its path prefix, parents and
pending points left out) is decided in one place,
:meth:`ingestd.store.search.query.Filters.conditions`; each engine only maps these
types to its library's own (qdrant-client's ``models.Filter``, Qdrant Edge's ``Filter``,
or a Python predicate), with the same meaning:

* :class:`Match`: the payload value at ``key`` equals ``value``, or, for a list of
  keywords (:data:`~ingestd.store.search.query.PATH_KEY`), holds it;
* :class:`MatchAny`: likewise for at least one of ``values``;
* a key of :attr:`Conditions.unset`: the point's payload has no ``true`` there (the
  keys are flags: ``true`` on the points they mark, absent on the others, so "not
  ``true``" and "absent" select the same points).

This module imports nothing beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = ["Condition", "Conditions", "Match", "MatchAny"]


@dataclass(frozen=True, slots=True)
class Match:
    """The payload value at ``key`` is ``value`` (a keyword list: it holds ``value``).

    Attributes:
        key: the payload key.
        value: the keyword.
    """

    key: str
    value: str


@dataclass(frozen=True, slots=True)
class MatchAny:
    """The payload value at ``key`` is one of ``values`` (a keyword list: holds one).

    Attributes:
        key: the payload key.
        values: the keywords.
    """

    key: str
    values: tuple[str, ...]


#: One condition a point's payload must meet.
Condition: TypeAlias = Match | MatchAny


@dataclass(frozen=True, slots=True)
class Conditions:
    """A conjunction: every condition of ``must`` holds and no flag of ``unset`` is set.

    Attributes:
        must: conditions on payload values, all of which hold.
        unset: boolean payload keys that must not be ``true`` (flags such as parent
            sections and points not yet committed), in the order engines list them.
    """

    must: tuple[Condition, ...] = ()
    unset: tuple[str, ...] = ()

    @classmethod
    def of_source(cls, source: str | None) -> Conditions | None:
        """The points of ``source`` (``None``: no conditions at all, returned as ``None``)."""
        return None if source is None else cls(must=(Match("source", source),))

    @classmethod
    def of_sources(cls, sources: Sequence[str] | None) -> Conditions | None:
        """The points of any of ``sources`` (``None``: no conditions, returned as ``None``)."""
        return None if sources is None else cls(must=(MatchAny("source", tuple(sources)),))

    def accepts(self, payload: Mapping[str, Any]) -> bool:
        """Whether a point with ``payload`` meets the conditions (checked in Python).

        The reference meaning of the conditions, for engines without filters of their
        own and for a point read by id after a search.
        """
        for cond in self.must:
            have = payload.get(cond.key)
            values = have if isinstance(have, list) else [have]
            wanted = (cond.value,) if isinstance(cond, Match) else cond.values
            if not any(v in values for v in wanted):
                return False
        return not any(payload.get(key) for key in self.unset)
