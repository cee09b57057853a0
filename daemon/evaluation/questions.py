"""Question sets: the JSON-lines format ``ingestd eval`` and ``bench/`` read.

A question set is a JSON-lines file, one question per line, in the format of the
project's dev sets (``qa/README.md`` beside the corpora)::

    {"id": "q001", "question": "How do I write a literal dollar sign?",
     "path": "docs/collector/configuration.md",
     "answer": "Use `$$` to indicate a literal `$`.", "kind": "config"}

``path`` is the gold file, relative to the corpus root (POSIX separators); ``answer``
is a verbatim substring of that file (after decoding: UTF-8, BOM removed, line ends
made LF) outside its front matter; ``kind`` is a free label. Other keys are ignored.
:func:`load_questions` checks every line and locates each answer in its file, so that
:func:`ingestd.daemon.evaluation.scoring.rank_hits` can compare it with the offsets of a hit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ingestd.chunkers.errors import InputError

__all__ = ["FIELDS", "Question", "QuestionError", "load_questions", "locate_answer"]

#: Keys every question has.
FIELDS = ("id", "question", "path", "answer", "kind")


class QuestionError(InputError, ValueError):
    """A question set is malformed; ``str()`` is ``FILE:LINE: problem`` lines."""


@dataclass(frozen=True)
class Question:
    """One question with its gold answer located in the gold file.

    Attributes:
        id: unique within the set.
        question: the text asked.
        path: the gold file, POSIX, relative to the corpus root.
        answer: the verbatim answer text.
        kind: a free label (``fact``, ``howto``, ...).
        start: offset of the answer in the decoded file, in characters.
        end: ``start + len(answer)``.
    """

    id: str
    question: str
    path: str
    answer: str
    kind: str
    start: int
    end: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (what the daemon is sent)."""
        return dict(self.__dict__)


def locate_answer(text: str, answer: str) -> int | None:
    """Offset of the first ``answer`` in ``text`` after its front matter, or ``None``.

    Args:
        text: a decoded file (:func:`ingestd.chunkers.text.decode`).
        answer: the verbatim answer.

    Returns:
        The start offset in characters; the front matter (YAML ``---`` or TOML
        ``+++`` at the top, as the markdown chunker reads it) is skipped.
    """
    from ingestd.chunkers.strategies.markdown import parse_front_matter

    body, _ = parse_front_matter(text)
    pos = text.find(answer, body)
    return pos if pos >= 0 else None


def load_questions(path: Path, corpus: Path) -> list[Question]:
    """Read a question set and locate every answer in its gold file under ``corpus``.

    Args:
        path: the JSON-lines file.
        corpus: the root folder the questions' paths are relative to.

    Returns:
        The questions in file order.

    Raises:
        QuestionError: every problem found (not JSON, a key missing or not a string,
            a repeated id, a path outside the corpus or missing, a file that is not
            text, an answer not found after the front matter), one line each.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionError(f"{path}: cannot read the question set: {exc}") from None
    problems: list[str] = []
    out: list[Question] = []
    seen: set[str] = set()
    texts: dict[str, str | None] = {}
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{no}"
        obj = _fields(line, where, problems)
        if obj is None:
            continue
        qid, rel, answer = obj["id"], obj["path"], obj["answer"]
        where = f"{where} ({qid})"
        if qid in seen:
            problems.append(f"{where}: id repeated")
            continue
        seen.add(qid)
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or "\\" in rel:
            problems.append(f"{where}: path must be relative to the corpus, POSIX: {rel!r}")
            continue
        if rel not in texts:
            texts[rel] = _read(Path(corpus), rel, where, problems)
        text = texts[rel]
        if text is None:
            continue
        start = locate_answer(text, answer)
        if start is None:
            problems.append(f"{where}: answer not found verbatim in {rel} (after front matter)")
            continue
        out.append(
            Question(qid, obj["question"], rel, answer, obj["kind"], start, start + len(answer))
        )
    if problems:
        raise QuestionError("\n".join(problems))
    if not out:
        raise QuestionError(f"{path}: no questions")
    return out


def _fields(line: str, where: str, problems: list[str]) -> dict[str, str] | None:
    """The question of one line, or ``None`` with the problem appended."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        problems.append(f"{where}: not JSON: {exc.msg}")
        return None
    if not isinstance(obj, dict):
        problems.append(f"{where}: expected a JSON object with keys {', '.join(FIELDS)}")
        return None
    bad = [k for k in FIELDS if not isinstance(obj.get(k), str) or not obj[k]]
    if bad:
        problems.append(f"{where}: missing or not a non-empty string: {', '.join(bad)}")
        return None
    return {k: obj[k] for k in FIELDS}


def _read(corpus: Path, rel: str, where: str, problems: list[str]) -> str | None:
    """The decoded text of ``rel``, or ``None`` with the problem appended."""
    from ingestd.chunkers.text import UndecodableError, decode

    try:
        return decode((corpus / rel).read_bytes())
    except OSError as exc:
        problems.append(f"{where}: cannot read {rel} in {corpus}: {exc.strerror or exc}")
    except UndecodableError as exc:
        problems.append(f"{where}: {rel} is not text: {exc}")
    return None
