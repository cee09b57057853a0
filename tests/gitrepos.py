"""Git repositories made at test time from the real commits of ``../shared/corpora/history``.

The history set is the rust-book's documentation (``base/`` and one JSON file per
commit in ``steps/``). :class:`HistoryRepo` replays it, restricted to a few chapters
(small enough for fast tests), into a git working repository whose commits and tags a
test makes, and pushes them to a bare repository (``origin``) that a git source reads.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.helpers import CORPORA

__all__ = ["HISTORY", "HistoryRepo", "git"]

HISTORY = CORPORA / "history"
#: The chapters the tests index (path prefixes in the history set): ~10 files, ~100 KB.
SMALL_SUBSET = ("src/ch01-", "src/ch03-0")

_ENV = {
    "GIT_AUTHOR_NAME": "ingestd tests",
    "GIT_AUTHOR_EMAIL": "tests@ingestd.invalid",
    "GIT_COMMITTER_NAME": "ingestd tests",
    "GIT_COMMITTER_EMAIL": "tests@ingestd.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``git ARGS`` in ``cwd`` (a test's own identity, no user config); its stdout."""
    full = {**os.environ, **_ENV, **(env or {})}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=full, check=True, capture_output=True, text=True
    ).stdout


class HistoryRepo:
    """A working repository replaying the history set, and its bare ``origin``.

    Args:
        where: a folder of the test (``work/`` and ``origin.git`` are made in it).
        prefixes: the history paths kept (default: :data:`SMALL_SUBSET`).

    Attributes:
        work: the working repository (branch ``main``).
        origin: the bare repository pushes go to (a git source's ``url``).
        step: the last step of the history applied.
    """

    def __init__(self, where: Path, prefixes: Sequence[str] = SMALL_SUBSET) -> None:
        self.prefixes = tuple(prefixes)
        self.work = where / "work"
        self.origin = where / "origin.git"
        self.work.mkdir(parents=True)
        git(self.work, "init", "-q", "-b", "main")
        git(where, "init", "-q", "--bare", str(self.origin))
        git(self.work, "remote", "add", "origin", str(self.origin))
        base = HISTORY / "base"
        for f in sorted(base.rglob("*")):
            rel = f.relative_to(base).as_posix()
            if f.is_file() and self._kept(rel):
                self._write(rel, f.read_bytes())
        self.step = 0
        self._steps = sorted((HISTORY / "steps").glob("*.json"))
        self.commit("base")

    def _kept(self, rel: str) -> bool:
        return rel.startswith(self.prefixes)

    def _write(self, rel: str, data: bytes) -> None:
        p = self.work / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def files(self) -> dict[str, bytes]:
        """The kept files of the working tree: path -> bytes."""
        return {
            p.relative_to(self.work).as_posix(): p.read_bytes()
            for p in sorted(self.work.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(self.work).parts
        }

    def advance(self) -> int:
        """Apply history steps until one changes a kept file; return that step's number."""
        while self.step < len(self._steps):
            data = json.loads(self._steps[self.step].read_text())
            self.step += 1
            touched = False
            for ch in data["changes"]:
                rel, op = ch["path"], ch["op"]
                old = ch.get("old_path")
                if op in ("delete", "rename") and old and self._kept(old):
                    (self.work / old).unlink(missing_ok=True)
                    touched = True
                if op == "delete" and self._kept(rel):
                    (self.work / rel).unlink(missing_ok=True)
                    touched = True
                elif op != "delete" and "content" in ch and self._kept(rel):
                    raw = ch["content"]
                    data_b = (
                        base64.b64decode(raw) if ch.get("encoding") == "base64" else raw.encode()
                    )
                    self._write(rel, data_b)
                    touched = True
            if touched:
                return self.step
        raise AssertionError("the history set has no further step for these files")

    def commit(self, message: str) -> str:
        """Commit everything in the working tree; the new commit id."""
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.work, "rev-parse", "HEAD").strip()

    def next_commit(self) -> str:
        """:meth:`advance`, then :meth:`commit` it (message: the step number)."""
        return self.commit(f"step {self.advance()}")

    def tag(self, name: str, message: str | None = None) -> None:
        """Tag HEAD (annotated when ``message`` is given)."""
        if message:
            git(self.work, "tag", "-a", name, "-m", message)
        else:
            git(self.work, "tag", name)

    def push(self, *refs: str, force: bool = False) -> None:
        """Push ``refs`` (default: ``main`` and every tag) to ``origin``."""
        args = ["push", "-q"] + (["--force"] if force else []) + ["origin"]
        git(self.work, *args, *(refs or ("main", "--tags")))

    def delete_remote(self, ref: str) -> None:
        """Delete ``ref`` (``refs/tags/v1`` or ``refs/heads/x``) from ``origin``."""
        git(self.work, "push", "-q", "origin", f":{ref}")

    def snapshot(self, ref: str) -> dict[str, bytes]:
        """The kept files at ``ref`` of the working repository: path -> bytes."""
        out = {}
        names = git(self.work, "ls-tree", "-r", "--name-only", ref).splitlines()
        for rel in names:
            out[rel] = subprocess.run(
                ["git", "show", f"{ref}:{rel}"], cwd=self.work, check=True, capture_output=True
            ).stdout
        return out

    def remove(self) -> None:
        """Delete both repositories."""
        shutil.rmtree(self.work, ignore_errors=True)
        shutil.rmtree(self.origin, ignore_errors=True)
