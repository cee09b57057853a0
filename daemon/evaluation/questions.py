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

A question may also carry graded page judgements, ``"qrels": {"docs/a.md": 3,
"docs/guides/": 1}`` (a path or a folder, relative to the corpus root -> grade 1 to
3, :mod:`~ingestd.daemon.evaluation.pages`), beside its verbatim answer or instead of
it (then ``path``, ``answer`` and ``kind`` may be left out)::

    {"id": "c001", "question": "How do spans differ from logs?",
     "qrels": {"docs/concepts/signals/traces.md": 3, "docs/concepts/signals/logs.md": 3}}

A question with a verbatim answer and no judgement is judged at page level by its gold
file alone (grade 3). Judgements kept apart from the questions (a read-only question
set) are added by :func:`add_judgements`, keyed by the questions' ids.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from ingestd.chunkers.errors import InputError

__all__ = [
    "FIELDS",
    "Question",
    "QuestionError",
    "add_judgements",
    "check_qrels",
    "load_questions",
    "locate_answer",
]

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
        start: offset of the answer in the decoded file, in characters (-1: no answer).
        end: ``start + len(answer)``.
        qrels: graded page judgements, target (path or folder) -> grade 1-3; empty:
            the gold file at grade 3 (see :attr:`judgements`).
    """

    id: str
    question: str
    path: str
    answer: str
    kind: str
    start: int
    end: int
    qrels: dict[str, int] = field(default_factory=dict)

    @property
    def has_answer(self) -> bool:
        """Whether the question has a verbatim answer (path and span levels score it)."""
        return bool(self.answer)

    @property
    def judgements(self) -> dict[str, int]:
        """The page judgements it is scored by: its qrels, its gold file at grade 3."""
        out = dict(self.qrels)
        if self.path and self.path not in out:
            out[self.path] = 3
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (what the daemon is sent)."""
        return {**self.__dict__, "qrels": dict(self.qrels)}


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
        qrels = check_qrels(obj.get("qrels"), where, problems)
        if qrels is None:
            continue
        if not answer:  # judged at page level only
            out.append(Question(qid, obj["question"], "", "", obj["kind"], -1, -1, qrels))
            continue
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
            Question(
                qid, obj["question"], rel, answer, obj["kind"], start, start + len(answer), qrels
            )
        )
    if problems:
        raise QuestionError("\n".join(problems))
    if not out:
        raise QuestionError(f"{path}: no questions")
    return out


def _fields(line: str, where: str, problems: list[str]) -> dict[str, Any] | None:
    """The question of one line, or ``None`` with the problem appended.

    A line with ``qrels`` needs only ``id`` and ``question`` (``path``, ``answer`` and
    ``kind`` then default to empty, ``page``).
    """
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        problems.append(f"{where}: not JSON: {exc.msg}")
        return None
    if not isinstance(obj, dict):
        problems.append(f"{where}: expected a JSON object with keys {', '.join(FIELDS)}")
        return None
    needed = FIELDS if "qrels" not in obj or "answer" in obj else ("id", "question")
    bad = [k for k in needed if not isinstance(obj.get(k), str) or not obj[k]]
    if bad:
        problems.append(f"{where}: missing or not a non-empty string: {', '.join(bad)}")
        return None
    out: dict[str, Any] = {k: obj.get(k) or "" for k in FIELDS}
    out["kind"] = out["kind"] or "page"
    out["qrels"] = obj.get("qrels")
    return out


def check_qrels(raw: Any, where: str, problems: list[str]) -> dict[str, int] | None:
    """Judgements ``{target: grade}`` as given, checked; ``{}`` for none given.

    Returns:
        The judgements, or ``None`` with the problems appended (not an object, a
        target that is absolute or leaves the corpus, a grade that is not 1, 2 or 3).
    """
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        problems.append(f"{where}: qrels must be a non-empty object of path -> grade (1-3)")
        return None
    out: dict[str, int] = {}
    for target, grade in raw.items():
        pure = PurePosixPath(str(target))
        if not target or pure.is_absolute() or ".." in pure.parts or "\\" in target:
            problems.append(f"{where}: qrels target must be relative to the corpus: {target!r}")
        elif isinstance(grade, bool) or grade not in (1, 2, 3):
            problems.append(f"{where}: qrels grade of {target} must be 1, 2 or 3: {grade!r}")
        else:
            out[str(target)] = int(grade)
    return out if len(out) == len(raw) else None


def add_judgements(questions: list[Question], path: Path) -> list[Question]:
    """``questions`` with the judgements of file ``path`` added, by question id.

    The file is JSON lines ``{"id", "qrels": {target: grade}}`` (a line that also has
    ``question`` and an id the set lacks adds a question judged at page level), or
    TREC qrels lines ``QID ITER TARGET GRADE`` (grade 0 lines are ignored).

    Returns:
        The questions, judgements merged into each one's ``qrels``, then the questions
        the file adds, in file order.

    Raises:
        QuestionError: every problem, one line each (an id the set lacks without a
            question, a bad target or grade, a line that is neither format).
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionError(f"{path}: cannot read the judgements: {exc}") from None
    problems: list[str] = []
    by_id = {q.id: q for q in questions}
    added: list[Question] = []
    for no, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{no}"
        got = _judgement(line, where, problems)
        if got is None:
            continue
        qid, qrels, question = got
        if qid in by_id:
            q = by_id[qid]
            by_id[qid] = replace(q, qrels={**q.qrels, **qrels})
        elif question:
            by_id[qid] = Question(qid, question, "", "", "page", -1, -1, qrels)
            added.append(by_id[qid])
        else:
            problems.append(f"{where}: no question {qid} in the set (give its question)")
    if problems:
        raise QuestionError("\n".join(problems))
    return [by_id[q.id] for q in questions] + [by_id[q.id] for q in added]


def _judgement(
    line: str, where: str, problems: list[str]
) -> tuple[str, dict[str, int], str] | None:
    """``(id, qrels, question or "")`` of one line of a judgements file."""
    if line.lstrip().startswith("{"):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not JSON: {exc.msg}")
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            problems.append(f"{where}: expected an object with id and qrels")
            return None
        qrels = check_qrels(obj.get("qrels"), where, problems)
        if not qrels:
            if qrels == {}:
                problems.append(f"{where}: no qrels")
            return None
        return obj["id"], qrels, str(obj.get("question") or "")
    parts = line.split()
    if len(parts) != 4 or not parts[3].lstrip("-").isdigit():
        problems.append(f"{where}: expected JSON or a TREC qrels line: QID ITER TARGET GRADE")
        return None
    grade = int(parts[3])
    if grade <= 0:
        return None
    qrels = check_qrels({parts[2]: grade}, where, problems)
    return (parts[0], qrels, "") if qrels else None


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
