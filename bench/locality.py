"""Edit locality of the default rules: chunk ids an edit changes (chunks embedded again).

A chunk id is content-addressed (the hash of its embedded text and its occurrence in
the document), so every chunk an edit changes is a new point and, unless its text was
embedded before, a new embedding. Two measurements, both with the default rules
(``load_config(None, roots=[corpus])``, the rule each path matches: what the daemon
stores):

* **history**: the rust-book history (``../shared/corpora/history``: ``src/*.md`` at
  the base commit, then its 223 real commits, replayed in memory as
  ``tests/gitrepos.py`` ``HistoryRepo`` does). For every file a step changes, the
  ids of the new version not in the old one (*changed*: points written) and the
  embedded texts not in the old one (*embedded*: what the model is asked for); per
  changed file (mean, median, 90th percentile, max) and per step (total). A renamed
  file keeps its ids only by its texts (the point ids carry the path), so renames count
  by text only;
* **md-docs edit**: a one-sentence edit (``EDIT``, put at the start of the prose
  paragraph nearest the middle of the body) in every md-docs page of at least
  ``--min-chars`` characters (default 25,000: 36 pages, 24 to 133 chunks): changed ids
  and shifted chunks per edit, mean, median, 90th percentile, max; with ``--spread N``
  also about N edits spread over each page (the start of every k-th paragraph). The
  pages are chosen by size, not by chunk count, so that two chunkers edit the same
  pages.

A *shifted* chunk is a changed one whose lines the edit did not touch and whose
heading path the old version had: it changed only because a packing boundary moved.

Target (issue 31): a one-sentence edit changes its own chunk in the median case and
at most about three chunks in nine cases of ten, as before chunks were packed to
three quarters of the budget; on the history, per changed file about what that
packing embeds.

``--variant k=v,...`` measures the default rules with those params changed in every
markdown, rst and hierarchical rule beside the default rules (``min_tokens=50``: the
packing of a quarter of the budget, and its locality).

Usage::

    python bench/locality.py [--only history,md-docs] [--min-chars 25000] [--spread 40]
    python bench/locality.py --variant min_tokens=50
"""

from __future__ import annotations

import argparse
import base64
import difflib
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.helpers import CORPORA  # noqa: E402  (the repository's test helpers)

HISTORY = CORPORA / "history"
MD_DOCS = CORPORA / "md-docs"
#: The sentence the synthetic edit inserts (as tests/chunkers/strategies/test_markdown.py).
EDIT = "Edited: a new sentence is added to this paragraph. "

#: ``(relative path, text) -> chunks``: per chunk its id (embedded-text hash and
#: occurrence), its 1-based lines (end inclusive) and its heading path.
Ids = Callable[[str, str], list["Piece"]]


class Piece(NamedTuple):
    """A chunk as this bench sees it."""

    id: tuple[str, int]
    lines: tuple[int, int]
    path: tuple[str, ...]


def rules_ids(corpus: Path, variant: dict[str, Any] | None = None) -> Ids:
    """The chunk ids of the default rules for ``corpus`` (params changed by ``variant``)."""
    from ingestd.daemon.config import load_config
    from ingestd.daemon.sync.preparing.rules import RuleSet, build_context
    from ingestd.store.embedding.embedder import model_info
    from ingestd.store.vectors.ids import chunk_hash

    cfg = load_config(None, roots=[corpus])
    rules = cfg.rules
    if variant:
        rules = [
            r.model_copy(update={"params": {**r.params, **variant}})
            if r.chunker in ("markdown", "rst", "hierarchical")
            else r
            for r in rules
        ]
    ctx, tok = build_context(cfg)
    ruleset = RuleSet(rules, ctx, tok, model_info(cfg.embedding.model).fingerprint)

    def ids(rel: str, text: str) -> list[Piece]:
        rule = ruleset.match(rel)
        doc = rule.reader.read(text.encode())
        seen: Counter[str] = Counter()
        out = []
        for c in rule.chunker.chunk_document(doc):
            if c.is_parent:
                continue
            h = chunk_hash(c.embed_text)
            out.append(Piece((h, seen[h]), (c.start_line, c.end_line), tuple(c.heading_path)))
            seen[h] += 1
        return out

    return ids


def history_steps() -> tuple[dict[str, str], list[list[tuple[str, str | None, str | None]]]]:
    """The base files (path -> text) and, per step, ``(path, old path, new text or None)``.

    ``old path`` is set for a rename; ``new text`` is None for a delete, and for a rename
    that keeps the bytes.
    """
    meta = json.loads((HISTORY / "meta.json").read_text())
    prefix, suffix = meta["subset"]["prefix"], meta["subset"]["suffix"]
    base = HISTORY / "base"
    files = {
        p.relative_to(base).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(base.rglob("*"))
        if p.is_file()
        and p.relative_to(base).as_posix().startswith(prefix)
        and p.name.endswith(suffix)
    }
    steps = []
    for path in sorted((HISTORY / "steps").glob("*.json")):
        changes = []
        for ch in json.loads(path.read_text())["changes"]:
            text = None
            if "content" in ch:
                raw = ch["content"]
                data = base64.b64decode(raw) if ch.get("encoding") == "base64" else raw.encode()
                text = data.decode("utf-8")
            if ch["op"] == "delete":
                changes.append((ch["path"], None, None))
            else:
                changes.append((ch["path"], ch.get("old_path"), text))
        steps.append(changes)
    return files, steps


def changed_lines(old: str, new: str) -> list[tuple[int, int]]:
    """The lines of ``new`` an edit touched: 1-based ``(first, last)`` ranges, inclusive.

    A deletion touches the lines on both sides of where the text was.
    """
    a, b = old.splitlines(), new.splitlines()
    out = []
    for op, _, _, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            out.append((j1 + 1, j2) if j2 > j1 else (j1, j1 + 1))
    return out


def compare(
    before: list[Piece], after: list[Piece], touched: list[tuple[int, int]]
) -> Counter[str]:
    """Of ``after``'s chunks: ``changed`` (new ids), ``embedded`` (new texts), ``shifted``.

    A shifted chunk is a changed one whose lines the edit did not touch and whose
    heading path the old version had: it changed only because a boundary moved.
    """
    old_ids = {p.id for p in before}
    old_texts = {p.id[0] for p in before}
    old_paths = {p.path for p in before}
    changed = [p for p in after if p.id not in old_ids]
    shifted = [
        p
        for p in changed
        if p.path in old_paths
        and not any(p.lines[0] <= hi and lo <= p.lines[1] for lo, hi in touched)
    ]
    return Counter(
        changed=len(changed),
        embedded=len({p.id[0] for p in after} - old_texts),
        shifted=len(shifted),
        chunks=len(after),
    )


def replay(ids: Ids, limit: int | None = None) -> dict[str, list[int]]:
    """Per changed file: the :func:`compare` counts; per step: ``step`` (texts embedded).

    A renamed file's point ids change with its path: a rename counts every chunk as
    changed, and as embedded only the texts its old version did not have.
    """
    files, steps = history_steps()
    cache: dict[str, list[Piece]] = {}

    def of(rel: str, text: str) -> list[Piece]:
        key = f"{rel}\0{text}"
        if key not in cache:
            cache[key] = ids(rel, text)
        return cache[key]

    out: dict[str, list[int]] = {k: [] for k in ("changed", "embedded", "shifted", "chunks")}
    out["step"] = []
    for changes in steps[:limit]:
        step_embedded = 0
        for rel, old_path, text in changes:
            prev = files.pop(old_path or rel, None)
            if text is None and old_path is None:  # deleted
                continue
            new_text = text if text is not None else prev
            assert new_text is not None
            files[rel] = new_text
            if prev is None or prev == new_text and old_path is None:
                continue  # added (no old version), or unchanged
            before, after = of(old_path or rel, prev), of(rel, new_text)
            counts = compare(before, after, changed_lines(prev, new_text))
            if old_path is not None:
                counts["changed"] = len(after)
            for k in ("changed", "embedded", "shifted", "chunks"):
                out[k].append(counts[k])
            step_embedded += counts["embedded"]
        out["step"].append(step_embedded)
        if len(cache) > 4096:
            cache.clear()
    return out


def paragraph_starts(text: str) -> list[int]:
    """Offsets of prose paragraphs: after a blank line, a letter, not a setext title."""
    out = []
    for m in re.finditer(r"\n\n([A-Za-z][^\n]*)\n([^\n]*)", text):
        under = m.group(2).strip()
        if not (under and len(set(under)) == 1 and not under[0].isalnum()):
            out.append(m.start(1))
    return out


def long_pages(min_chars: int) -> list[str]:
    """md-docs pages (relative paths) of at least ``min_chars`` characters, with prose."""
    out = []
    for p in sorted(MD_DOCS.rglob("*.md")):
        text = p.read_text(encoding="utf-8")
        if len(text) >= min_chars and paragraph_starts(text):
            out.append(p.relative_to(MD_DOCS).as_posix())
    return out


def page_edits(
    ids: Ids, pages: list[str], spread: int
) -> tuple[list[Counter[str]], list[Counter[str]]]:
    """:func:`compare` of the middle edit of each page, and of ``spread`` edits per page."""
    middle, spread_out = [], []
    for rel in pages:
        text = (MD_DOCS / rel).read_text(encoding="utf-8")
        before = ids(rel, text)
        starts = paragraph_starts(text)
        mid = min(starts, key=lambda s: abs(s - len(text) // 2))
        picks = [mid] + (starts[:: max(1, len(starts) // spread)] if spread else [])
        for k, at in enumerate(picks):
            line = text.count("\n", 0, at) + 1
            counts = compare(before, ids(rel, text[:at] + EDIT + text[at:]), [(line, line)])
            (middle if k == 0 else spread_out).append(counts)
    return middle, spread_out


def _summary(xs: list[int]) -> str:
    if not xs:
        return "n=0"
    q = sorted(xs)
    p90 = q[min(len(q) - 1, int(0.9 * len(q)))]
    return (
        f"n={len(xs)} mean {statistics.fmean(xs):.2f} median {statistics.median(xs):g} "
        f"p90 {p90} max {max(xs)} total {sum(xs)}"
    )


def _variant(spec: str) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for part in filter(None, spec.split(",")):
        k, _, v = part.partition("=")
        out[k.strip()] = yaml.safe_load(v)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="history,md-docs", help="history and/or md-docs")
    ap.add_argument("--min-chars", type=int, default=25_000, help="md-docs pages this long")
    ap.add_argument("--spread", type=int, default=0, help="also N edits spread over each page")
    ap.add_argument("--steps", type=int, help="only the first N history steps")
    ap.add_argument("--variant", action="append", default=[], help="k=v,... params")
    args = ap.parse_args()
    only = set(args.only.split(","))
    labels = ["default", *(f"default {v}" for v in args.variant)]
    variants = [None, *(_variant(v) for v in args.variant)]
    pages = long_pages(args.min_chars)
    for label, variant in zip(labels, variants, strict=True):
        print(f"== {label}")
        if "history" in only:
            t0 = time.perf_counter()
            res = replay(rules_ids(HISTORY / "base", variant), args.steps)
            took = time.perf_counter() - t0
            n = len(res["step"])
            print(f"history: {n} steps, {len(res['changed'])} file changes ({took:.0f} s)")
            for k in ("changed", "embedded", "shifted", "chunks"):
                print(f"  {k + ' per changed file:':<28}{_summary(res[k])}")
            print(f"  {'embedded per step:':<28}{_summary(res['step'])}")
        if "md-docs" in only:
            ids = rules_ids(MD_DOCS, variant)
            middle, spread = page_edits(ids, pages, args.spread)
            sizes = sorted(len(ids(rel, (MD_DOCS / rel).read_text())) for rel in pages)
            print(f"md-docs: {len(pages)} pages of >= {args.min_chars} characters, chunks: {sizes}")
            for name, runs in (("middle edit", middle), (f"{args.spread} edits/page", spread)):
                if not runs:
                    continue
                for k in ("changed", "shifted"):
                    xs = [c[k] for c in runs]
                    print(f"  {name}, {k}: {_summary(xs)}")
                    print(f"    histogram: {sorted(Counter(xs).items())}")


if __name__ == "__main__":
    main()
