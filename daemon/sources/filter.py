r"""Which files of a local folder source are documents: the built-in ignores, globs, ``.gitignore``.

Filtering (shared by scans and the watcher, so ignored paths never reach the planner):

* always ignored: VCS folders (``.git``, ``.hg``, ``.svn``), ``__pycache__``,
  ``node_modules``, virtualenvs, the state dir when it lies inside the root, and
  editor temporaries (vim's ``4913`` probe, swap files, ``name~`` backups, emacs
  ``.#name`` locks and ``#name#`` autosaves);
* then ``include`` globs, then ``exclude`` globs, then ``.gitignore`` files (root and
  nested, via pathspec's gitignore semantics) when the source honours them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pathspec

from ingestd.daemon.config.models import SourceConfig

__all__ = ["SourceFilter"]

_IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        "node_modules",
        ".venv",
        "venv",
        ".tox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".idea",
        ".vscode",
    }
)
#: Names of editors' and tools' temporary files, never documents (unless a source's
#: ``include`` names one exactly): vim (its ``4913`` probe, ``.name.swp``, ``name~``),
#: emacs (``.#name`` locks, ``#name#`` autosaves), JetBrains IDEs' safe write
#: (``name___jb_tmp___``, ``name___jb_old___``), VS Code's atomic write
#: (``name.vsctmp``), Chromium's File System Access writes (``name.crswap``), Microsoft
#: Office (``~$name``) and LibreOffice (``.~lock.name#``) lock files, Kate, GNOME's
#: gio (``.goutputstream-*``), and the ``.tmp``/``.bak``/``.part``/``.crdownload``
#: files of many tools.
_TEMP_FILE = re.compile(
    r"""^(
        4913 | \.\#.* | \#.*\# | .*~ | \..*\.sw[a-p] | .*\.sw[a-p]x? | .*\.tmp | .*\.bak
        | .*___jb_(?:tmp|old|bak)___ | .*\.vsctmp | .*\.crswap | ~\$.*
        | \.~lock\..*\# | .*\.kate-swp | \.goutputstream-.* | .*\.crdownload | .*\.part
    )$""",
    re.VERBOSE,
)
#: Characters that make an ``include`` entry a pattern rather than a name.
_GLOB_CHARS = frozenset("*?[")
_ESCAPE = re.compile(r"\\(.)")


class SourceFilter:
    """Decides whether a path of one source is a document.

    Args:
        source: the source.
        state_dir: ingestd's state dir, ignored when it lies inside the root.

    Paths given to the methods are POSIX and relative to the source root. The engine's
    thread and the source's watcher thread share a filter: the watcher forgets cached
    ``.gitignore`` rules when one changes, while a scan may be reading them.
    """

    __slots__ = (
        "_exclude",
        "_explicit",
        "_gitignores",
        "_include",
        "_state_rel",
        "root",
        "source",
    )

    def __init__(self, source: SourceConfig, state_dir: Path | None = None) -> None:
        self.source = source
        self.root = Path(source.root)
        self._include = pathspec.GitIgnoreSpec.from_lines(source.include)
        # include entries that name a file rather than match many: a temporary's name
        # given there is indexed (a document really called "notes.bak")
        self._explicit = frozenset(
            _ESCAPE.sub(r"\1", p).strip("/")  # gitignore escapes: "\#name#" names "#name#"
            for p in source.include
            if p and not p.startswith(("!", "#")) and not _GLOB_CHARS & set(_ESCAPE.sub("", p))
        )
        self._exclude = pathspec.GitIgnoreSpec.from_lines(source.exclude)
        self._gitignores: dict[str, pathspec.GitIgnoreSpec | None] = {}
        self._state_rel: str | None = None
        if state_dir is not None:
            try:
                rel = Path(os.path.realpath(state_dir)).relative_to(self.root)
                self._state_rel = rel.as_posix() if rel.parts else None
            except ValueError:
                pass

    def __repr__(self) -> str:
        return f"SourceFilter(source={self.source.name!r}, root={str(self.root)!r})"

    def ignores_dir(self, rel: str) -> bool:
        """Whether folder ``rel`` (and all below it) is ignored."""
        if not rel or rel == ".":
            return False
        parts = rel.split("/")
        if any(p in _IGNORED_DIRS for p in parts):
            return True
        if self._state_rel and (rel == self._state_rel or rel.startswith(self._state_rel + "/")):
            return True
        if self._exclude.match_file(rel + "/"):
            return True
        return self.source.gitignore and self._gitignored(rel, is_dir=True)

    def accepts(self, rel: str) -> bool:
        """Whether file ``rel`` is a document of this source."""
        if not rel or rel.startswith("../"):
            return False
        parts = rel.split("/")
        if _TEMP_FILE.match(parts[-1]) and not self._named(rel, parts[-1]):
            return False
        if len(parts) > 1 and self.ignores_dir("/".join(parts[:-1])):
            return False
        if not self._include.match_file(rel) or self._exclude.match_file(rel):
            return False
        return not (self.source.gitignore and self._gitignored(rel, is_dir=False))

    def excluded_by(self, rel: str) -> str | None:
        """Why file ``rel`` is not a document of this source, and how to change it; ``None``.

        ``None`` exactly when :meth:`accepts` is true; else one sentence naming the
        rule that leaves it out (a built-in ignore, the ``include`` or ``exclude`` glob,
        the ``.gitignore`` file and its pattern) and the config key that changes it.
        """
        if not rel or rel.startswith("../"):
            return "outside the source's root"
        parts = rel.split("/")
        if _TEMP_FILE.match(parts[-1]) and not self._named(rel, parts[-1]):
            return (
                "an editor's or tool's temporary file name (built-in); "
                "to index it, name it in the source's include"
            )
        for i in range(1, len(parts)):
            why = self.folder_excluded_by("/".join(parts[:i]))
            if why is not None:
                return why
        if not self._include.match_file(rel):
            globs = ", ".join(self.source.include)
            return f"matches no include glob ({globs}); add one to the source's include"
        return self._ignored_by(rel, is_dir=False)

    def folder_excluded_by(self, rel: str) -> str | None:
        """:meth:`excluded_by` for the folder ``rel`` (a file's parent)."""
        name = next((p for p in rel.split("/") if p in _IGNORED_DIRS), None)
        if name is not None:
            return f"under {name}/, a folder never indexed (built-in)"
        if self._state_rel and (rel == self._state_rel or rel.startswith(self._state_rel + "/")):
            return "inside ingestd's state dir"
        return self._ignored_by(rel, is_dir=True)

    def _ignored_by(self, rel: str, *, is_dir: bool) -> str | None:
        """The ``exclude`` glob, else the ``.gitignore`` line, that leaves ``rel`` out."""
        what = f"folder {rel}/ " if is_dir else ""
        hit = self._exclude.check_file(rel + ("/" if is_dir else ""))
        if hit.include and hit.index is not None:
            glob = self.source.exclude[hit.index]
            return f"{what}excluded by the glob {glob!r}; remove it from the source's exclude"
        if self.source.gitignore:
            found = self._gitignore_rule(rel, is_dir=is_dir)
            if found is not None:
                return f"{what}ignored by {found}; or set the source's gitignore: false"
        return None

    def _gitignore_rule(self, rel: str, *, is_dir: bool) -> str | None:
        """``DIR/.gitignore ('PATTERN')``: the last match that ignores ``rel``, or ``None``."""
        parts = rel.split("/")
        found: str | None = None
        for i in range(len(parts)):
            folder = "/".join(parts[:i])
            spec = self._spec_for(folder)
            if spec is None:
                continue
            res = spec.check_file("/".join(parts[i:]) + ("/" if is_dir else ""))
            if res.include is None:
                continue
            if not res.include:
                found = None
                continue
            where = f"{folder}/.gitignore" if folder else ".gitignore"
            pattern = spec.patterns[res.index].pattern if res.index is not None else "?"
            found = f"{where} ({pattern!r})"
        return found

    def _named(self, rel: str, name: str) -> bool:
        """Whether ``include`` names file ``rel`` exactly (by its path or its name)."""
        return rel in self._explicit or name in self._explicit

    def _spec_for(self, folder: str) -> pathspec.GitIgnoreSpec | None:
        # the watcher's thread may forget the cache at any moment (a .gitignore
        # changed): never read back what was just stored
        try:
            return self._gitignores[folder]
        except KeyError:
            pass
        f = self.root / folder / ".gitignore" if folder else self.root / ".gitignore"
        try:
            lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        self._gitignores[folder] = spec
        return spec

    def _gitignored(self, rel: str, *, is_dir: bool) -> bool:
        parts = rel.split("/")
        ignored = False
        for i in range(len(parts)):
            folder = "/".join(parts[:i])
            spec = self._spec_for(folder)
            if spec is None:
                continue
            sub = "/".join(parts[i:]) + ("/" if is_dir else "")
            res = spec.check_file(sub)
            if res.include is not None:
                ignored = bool(res.include)
        return ignored

    def forget_gitignore(self, rel_folder: str) -> None:
        """Drop the cached ``.gitignore`` of a folder (after it changed)."""
        self._gitignores.pop(rel_folder, None)
        if rel_folder == "":
            self._gitignores.clear()
