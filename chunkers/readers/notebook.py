r"""Jupyter notebooks (``.ipynb``) -> the markdown text of their cells, cited by cell.

The notebook is parsed by `nbformat <https://pypi.org/project/nbformat/>`_ (Jupyter's
own reader: every format version 4.x and older ones upgraded to 4) and written out as
one markdown document, which the ``notebook`` strategy chunks as markdown:

* a **markdown** cell: its source, verbatim (a fence it leaves open is closed, so that
  no cell swallows the next);
* a **code** cell: its source, verbatim, in a fenced block whose info string is the
  kernel's language (``metadata.kernelspec.language``, else ``language_info.name``,
  else ``python``), with a fence longer than any backtick run in the source;
* a **raw** cell: its source in a ``text`` fenced block;
* **outputs** are left out, unless ``outputs`` (characters) is set: then each text
  output (a stream, or the ``text/plain`` of a result or display) at most that long
  follows its cell in an ``output`` fenced block (ANSI colour codes removed); images,
  HTML and every longer output stay out;
* cells are separated by a blank line; empty cells leave nothing, but keep their
  number.

What is written is counted as it is written
(:class:`~ingestd.chunkers.readers.expansion.OutputBudget`): a notebook whose text would
pass :func:`~ingestd.chunkers.readers.expansion.expansion_limit` of its size stops there
with an :class:`~ingestd.chunkers.readers.expansion.ExpansionError` (fences are the one
part written more than once: a fence as long as a cell's longest backtick run, the
kernel's language on every code cell's fence). A language name is at most
:data:`MAX_LANGUAGE_CHARS` characters (it is also the ``language`` of every chunk's
payload).

Citations (:class:`CellSpans`): ``cell`` and ``end_cell`` are the 1-based positions of
the cells holding a chunk's first and last characters (empty cells counted), and
``cell_start_line`` / ``cell_end_line`` the lines within those cells' sources (a fence
line cites its cell's first or last line, an output its cell's last line).
"""

from __future__ import annotations

import bisect
import re
import warnings
from typing import Any

from ingestd.chunkers.readers.document import Extracted, FormatError
from ingestd.chunkers.readers.expansion import ExpansionError, OutputBudget
from ingestd.chunkers.text import decode

__all__ = ["MAX_LANGUAGE_CHARS", "CellSpans", "NotebookReader", "notebook_text"]

#: Most characters of a kernel's language name kept (longer ones are cut).
MAX_LANGUAGE_CHARS = 64

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`{3,}")


class CellSpans:
    """Cells of a notebook's extracted text.

    Args:
        text: the extracted text.
        regions: for each non-empty cell, in order: ``(cell, start, src_start,
            src_end)``: its 1-based number, where its part of the text starts (its
            opening fence, for code), and the span of its verbatim source.
    """

    __slots__ = ("_regions", "_starts", "_text")

    def __init__(self, text: str, regions: list[tuple[int, int, int, int]]) -> None:
        self._text = text
        self._regions = regions
        self._starts = [r[1] for r in regions]

    def _at(self, offset: int) -> tuple[int, int]:
        """Cell and line within its source of ``text[offset]`` (clamped into the source)."""
        k = max(0, bisect.bisect_right(self._starts, offset) - 1)
        cell, _, a, b = self._regions[k]
        return cell, self._text.count("\n", a, min(max(offset, a), b)) + 1

    def of(self, start: int, end: int) -> dict[str, int]:
        """``cell``, ``end_cell``, ``cell_start_line``, ``cell_end_line`` of ``text[start:end]``."""
        cell, line = self._at(start)
        end_cell, end_line = self._at(end - 1)
        return {
            "cell": cell,
            "end_cell": end_cell,
            "cell_start_line": line,
            "cell_end_line": end_line,
        }


def _language(nb: Any) -> str:
    meta = nb.get("metadata") or {}
    lang = (meta.get("kernelspec") or {}).get("language") or (meta.get("language_info") or {}).get(
        "name"
    )
    if not lang or not str(lang).strip():
        return "python"
    return str(lang).strip().split()[0].lower()[:MAX_LANGUAGE_CHARS]


def _fence(source: str) -> str:
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(source)), default=0)
    return "`" * max(3, longest + 1)


def _open_fence(source: str) -> str | None:
    """The fence a markdown source leaves open, if any (CommonMark's closing rule)."""
    open_: str | None = None
    for line in source.split("\n"):
        m = _FENCE_OPEN.match(line)
        if m is None:
            continue
        mark = m.group(1)
        if open_ is None:
            if not (mark[0] == "`" and "`" in line[m.end() :]):
                open_ = mark
        elif mark[0] == open_[0] and len(mark) >= len(open_) and not line[m.end() :].strip():
            open_ = None
    return open_


def _text_outputs(cell: Any, limit: int) -> list[str]:
    """The text outputs of a code cell at most ``limit`` characters long."""
    out = []
    for o in cell.get("outputs") or ():
        kind = o.get("output_type")
        if kind == "stream":
            text = o.get("text", "")
        elif kind in ("execute_result", "display_data"):
            text = (o.get("data") or {}).get("text/plain", "")
        else:
            continue
        if isinstance(text, list):
            text = "".join(text)
        text = _ANSI.sub("", str(text)).replace("\r\n", "\n").replace("\r", "\n").strip("\n")
        if text.strip() and len(text) <= limit:
            out.append(text)
    return out


def notebook_text(nb: Any, outputs: int = 0, budget: OutputBudget | None = None) -> Extracted:
    """The extracted markdown text of a parsed notebook, with its :class:`CellSpans`.

    Args:
        nb: the notebook as nbformat reads it (version 4).
        outputs: most characters of a text output kept (0: outputs left out).
        budget: counts the text as it is written, or ``None``.

    Raises:
        ExpansionError: the text passed ``budget`` (it stops there).
    """
    lang = _language(nb)
    parts: list[str] = []
    regions: list[tuple[int, int, int, int]] = []
    pos = 0
    for number, cell in enumerate(nb.get("cells") or (), 1):
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        source = str(source).replace("\r\n", "\n").replace("\r", "\n").rstrip()
        if not source.strip():
            continue
        kind = cell.get("cell_type")
        if parts:
            parts.append("\n\n")
            pos += 2
        start = pos
        if kind == "markdown":
            head, tail = "", ""
            if (left := _open_fence(source)) is not None:
                tail = "\n" + left
        else:
            fence = _fence(source)
            head = f"{fence}{lang if kind == 'code' else 'text'}\n"
            tail = "\n" + fence
            if kind == "code" and outputs > 0:
                kept = []
                for text in _text_outputs(cell, outputs):
                    inner = _fence(text)
                    kept.append(f"\n\n{inner}output\n{text}\n{inner}")
                    if budget is not None:
                        budget.spend(len(kept[-1]))
                tail += "".join(kept)
        if budget is not None:
            budget.spend(2 + len(head) + len(source) + len(tail))
        parts.append(head + source + tail)
        regions.append((number, start, start + len(head), start + len(head) + len(source)))
        pos += len(head) + len(source) + len(tail)
    text = "".join(parts) + ("\n" if parts else "")
    spans = CellSpans(text, regions) if regions else None
    return Extracted(text, spans, meta={"language": lang})


class NotebookReader:
    """Reads a ``.ipynb`` file (see the module docstring).

    Args:
        outputs: most characters of a text output kept in the text (0: none).
    """

    def __init__(self, outputs: int = 0) -> None:
        self.outputs = outputs

    def read(self, data: bytes) -> Extracted:
        """The extracted text of notebook ``data``.

        Raises:
            UndecodableError: not UTF-8 text.
            FormatError: not a notebook nbformat can read (the message says why).
            ExpansionError: its text would pass the expansion bound of ``data``'s size.
        """
        text = decode(data)
        try:
            import nbformat
        except ImportError:  # pragma: no cover - a dependency of ingestd
            raise FormatError("cannot read notebooks: nbformat is not installed") from None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                reads: Any = nbformat.reads  # untyped
                nb = reads(text, as_version=4, capture_validation_error={})
            budget = OutputBudget(len(data), "notebook cells and outputs")
            return notebook_text(nb, self.outputs, budget)
        except ExpansionError:
            raise
        except Exception as exc:  # nbformat raises many kinds: JSON, schema, version
            detail = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise FormatError(f"not a readable Jupyter notebook ({detail}); skipped") from None
