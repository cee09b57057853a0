"""Which payload keys cite an answer's text: the one definition every answer shape follows.

Every answer says where its text is: a search hit, a passage (hits of one document
merged) and what ``read`` returns, in every shape that carries them (``ingestd search``
and its ``--json``, ``ingestd read``, the MCP tools ``search`` and ``read``, and
:class:`~ingestd.daemon.client.Client`). Beside ``source``, ``path`` and the lines, that
is the keys of :data:`CITE_KEYS` the chunk's payload has:

* the format's own coordinates (:data:`~ingestd.chunkers.readers.document.CITATION_KEYS`:
  a PDF's ``page``/``end_page``, a notebook's ``cell``/``end_cell`` and the lines within
  them, an HTML page's own lines), since for those formats ``start_line``/``end_line``
  count lines of the text extracted from the file, which no reader of the file sees;
* for a versioned source (a git repository), :data:`VERSION_KEYS`: the ``version`` (the
  branch or tag) the text answers for and the ``commit`` it was read at.

:func:`cite` takes them from a payload (a hit's, a chunk's), :func:`span_cite` gives those
of a span that runs from one chunk to another (a passage), and :func:`version_text` is
how the text outputs show the version. The answers' schemas (the MCP tools' output
models, the client's typed dicts) declare exactly these keys; a test holds them to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ingestd.chunkers.readers.document import CITATION_KEYS

__all__ = ["CITE_KEYS", "END_KEYS", "VERSION_KEYS", "cite", "span_cite", "version_text"]

#: Keys of a versioned source's chunk: the version (a branch or tag name) it answers for,
#: and the commit of that version it was read at.
VERSION_KEYS = ("version", "commit")
#: Every key that cites an answer's text beyond ``source``, ``path`` and the lines.
CITE_KEYS = (*CITATION_KEYS, *VERSION_KEYS)
#: The keys of :data:`CITE_KEYS` that say where a span ends (the others: where it
#: starts, or what it is read from).
END_KEYS = ("end_page", "end_cell", "cell_end_line", "file_end_line")


def cite(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of :data:`CITE_KEYS` that ``payload`` has, with their values."""
    return {k: payload[k] for k in CITE_KEYS if k in payload}


def span_cite(first: Mapping[str, Any], last: Mapping[str, Any]) -> dict[str, Any]:
    """The citation of a span of one document from chunk ``first`` to chunk ``last``.

    Args:
        first: the payload (or :func:`cite`) of the chunk the span starts with.
        last: that of the chunk it ends with (the one ending last).

    Returns:
        ``first``'s keys of :data:`CITE_KEYS`, but :data:`END_KEYS` from ``last``: a
        passage from page 10 to page 11 cites ``page`` 10 and ``end_page`` 11.
    """
    out = {k: v for k, v in cite(first).items() if k not in END_KEYS}
    out.update((k, last[k]) for k in END_KEYS if k in last)
    return out


def version_text(payload: Mapping[str, Any]) -> str:
    """The version of a versioned source's chunk in words: ``v2.0 at 1a2b3c4d5e6f``.

    ``""`` for a chunk of a source without versions; the commit is cut to 12 digits, as
    ``ingestd status`` shows it.
    """
    version = payload.get("version")
    if not version:
        return ""
    commit = payload.get("commit")
    return f"{version} at {str(commit)[:12]}" if commit else str(version)
