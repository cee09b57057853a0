"""What ``status`` and ``sources`` show of a source, asked of its kind.

Each entry of :data:`~ingestd.daemon.sources.kinds.SOURCE_KINDS` names its
:class:`KindStatus` (``shown``): the status keys the kind adds to a source recorded in
the manifest, and the lines ``status`` and ``sources`` print of it. The status and CLI
modules ask :func:`recorded_status` and :func:`shown_by`, never a kind by name.

These commands read the state dir alone (no config, no daemon), where a source is known
by its recorded root only: each kind recognises its own sources there (a git source by
the fetch record of its mirror), and a source no other kind claims is the default
kind's (:data:`~ingestd.daemon.sources.kinds.DEFAULT_KIND`). This module, and every
``shown`` part, imports neither pydantic nor git's machinery.

The folder kind's part (:data:`FOLDER`) is here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from ingestd.daemon.sources.kinds import DEFAULT_KIND, SOURCE_KINDS, load

__all__ = [
    "FOLDER",
    "FolderStatus",
    "KindStatus",
    "When",
    "fetch_lines",
    "recorded_status",
    "recorded_versions",
    "shown_by",
]

#: Formats a time (seconds since the epoch, or ``None``: never) as ``status`` shows it.
When = Callable[[Any], str]


class KindStatus(Protocol):
    """What ``status`` and ``sources`` show of a source of one kind.

    A status entry (``s``, ``row``) is a source's entry of ``status --json``: ``source``,
    ``root``, ``root_missing``, ``collection``, ``documents``, ..., and the keys
    :meth:`recorded` added.
    """

    def recorded(self, root: Path) -> dict[str, Any] | None:
        """The status keys of the source recorded at ``root`` if it is of this kind.

        Returns:
            The keys to add to (or replace in) its status entry; ``None``: not of this
            kind.
        """
        ...

    def shows(self, s: Mapping[str, Any]) -> bool:
        """Whether status entry ``s`` is a source of this kind."""
        ...

    def where_lines(self, s: Mapping[str, Any]) -> Iterator[str]:
        """``status``'s lines saying where the documents come from (indented)."""
        ...

    def lines(self, s: Mapping[str, Any], when: When) -> Iterator[str]:
        """``status``'s lines of the kind's own state (after the warnings; indented)."""
        ...

    def empty_note(self, s: Mapping[str, Any]) -> str:
        """``status``'s warning on a source whose last sync found no document (one line)."""
        ...

    def where(self, row: Mapping[str, Any]) -> str:
        """The second column of ``sources``: where the documents come from."""
        ...

    def sources_lines(self, row: Mapping[str, Any], when: When) -> Iterator[str]:
        """``sources``'s further lines of the source (tab-separated), after its own."""
        ...


class FolderStatus:
    """What ``status`` and ``sources`` show of a folder source (``kind: local``)."""

    def recorded(self, root: Path) -> dict[str, Any] | None:
        """``{}``: a folder adds no key (``root_missing`` is every source's)."""
        return {}

    def shows(self, s: Mapping[str, Any]) -> bool:
        """Always: the folder is the kind of a source no other kind claims."""
        return True

    def where_lines(self, s: Mapping[str, Any]) -> Iterator[str]:
        """Its root (unless it names the source), and whether the root is missing."""
        name, root = s["source"], s.get("root")
        if root and root != name:
            yield f"  root: {root}"
        if s.get("root_missing"):
            yield (
                f"  ROOT MISSING: {root} is not a folder (unmounted, moved or deleted?); "
                "nothing is synced or deleted until it is back"
            )

    def lines(self, s: Mapping[str, Any], when: When) -> Iterator[str]:
        """None: a folder's state is every source's (documents, watches)."""
        yield from ()

    def empty_note(self, s: Mapping[str, Any]) -> str:
        """No file under its root matched the include globs."""
        return f"no file under {s['root']} matched its include globs at the last sync"

    def where(self, row: Mapping[str, Any]) -> str:
        """Its root."""
        return str(row["root"])

    def sources_lines(self, row: Mapping[str, Any], when: When) -> Iterator[str]:
        """None."""
        yield from ()


#: The folder kind's status part.
FOLDER = FolderStatus()


def fetch_lines(s: Mapping[str, Any], when: When) -> Iterator[str]:
    """``status``'s lines of a fetched source's fetches (a git repository, a site).

    Read from its entry's ``root_missing``, ``fetch_error``, ``fetched_at``,
    ``fetch_started`` and ``failing_since``: whether it was ever fetched, when last, and
    since when fetches fail. Each fact is one line: a source never fetched says so with
    its failure, if any, and since when (or that its first fetch began, or none did);
    one fetched before says when, then its failure.
    """
    failing, error, fetched = s.get("failing_since"), s.get("fetch_error"), s.get("fetched_at")
    if s.get("root_missing") or not fetched:
        if failing:
            yield (
                f"  NOT FETCHED: failing since {when(failing)}: {error}; nothing is synced or "
                "deleted, retried with back-off"
            )
        else:
            yield f"  NOT FETCHED: {error or _first_fetch(s, when)}; nothing is synced or deleted"
        if fetched:
            yield f"  last fetch: {when(fetched)}"
        return
    yield f"  last fetch: {when(fetched)}"
    if failing:
        yield (
            f"  FETCH FAILING since {when(failing)}: {error}; nothing is deleted, "
            "retried with back-off"
        )


def _first_fetch(s: Mapping[str, Any], when: When) -> str:
    """Where the first fetch of a source never fetched stands: begun (since when) or not."""
    started = s.get("fetch_started")
    if started:
        return f"its first fetch began {when(started)} and has not finished"
    return "no fetch has begun"


def _parts() -> list[KindStatus]:
    """Each kind's status part, the default kind's last (it claims every source)."""
    order = sorted(SOURCE_KINDS, key=lambda k: k == DEFAULT_KIND)
    return [load(SOURCE_KINDS[k].shown) for k in order]


def recorded_status(root: Path) -> dict[str, Any]:
    """The status keys the kind of the source recorded at ``root`` adds (``{}``: none)."""
    for part in _parts():
        keys = part.recorded(root)
        if keys is not None:
            return keys
    return {}


def recorded_versions(root: Path) -> set[str] | None:
    """The versions of the source recorded at ``root``, as its record holds them.

    What ``sources`` lists of a source read from the state dir alone (no config): the
    ``refs`` of its status keys (a git source's last good fetch).

    Returns:
        The version names (empty: not fetched yet); ``None``: its kind has no versions.
    """
    refs = recorded_status(root).get("refs")
    if refs is None:
        return None
    return {str(r["version"]) for r in refs}


def shown_by(s: Mapping[str, Any]) -> KindStatus:
    """The status part of the kind of status entry ``s``."""
    return next((p for p in _parts() if p.shows(s)), FOLDER)
