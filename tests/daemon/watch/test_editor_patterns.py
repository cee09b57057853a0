"""Editors' saves end as one update of the real path and nothing else.

Each test replays, with plain ``os`` calls, the exact file-system sequence an editor
performs when it saves (strace of vim 9 and emacs 28 with their default settings), on
a tree of real md-docs pages watched by a real :class:`Service` (real inotify
watcher, fake embedder). Afterwards: only the saved path was planned, only its
changed chunks were embedded, ``verify`` is clean and the store equals a
from-scratch ingest.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.daemon.harness import Harness
from tests.helpers import CountingEmbedder, copy_tree

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning"),
]

PAGES = (
    "blog/2023/php-beta-release.md",
    "blog/2023/integrations.md",
    "community/end-user/otel-in-practice.md",
)
PAGE = "blog/2023/php-beta-release.md"
ADDED = "\n\nA paragraph added in the editor, about PHP auto-instrumentation.\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return copy_tree(tmp_path / "docs", PAGES)


def _write(path: Path, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_one_update(h: Harness, embed: CountingEmbedder, scratch: Path, n: int, p: int) -> None:
    """Only PAGE was planned since plan ``p``; only new text was embedded since ``n``."""
    planned = h.paths_applied(p)
    assert planned and set(planned) == {PAGE}, planned
    deleted = [d for plan in h.applied[p:] for d in plan.delete]
    assert deleted == []
    new = embed.texts[n:]
    assert new and all("added in the editor" in t for t in new), new
    h.assert_matches_oracle(scratch)


def test_vim_default_save(tree: Path, scratch: Path, fake_embedder: CountingEmbedder) -> None:
    """vim (backup off, writebackup on, backupcopy=auto) on a file with one link."""
    d = tree / "blog/2023"
    with Harness(tree, scratch / "state", fake_embedder) as h:
        n, p, b = len(fake_embedder.texts), len(h.applied), h.service.batches_done
        text = (tree / PAGE).read_text()
        # opening the file: the swap file
        swp = d / ".php-beta-release.md.swp"
        _write(swp, "b0VIM 9.0\0" * 10)
        _write(swp, "b0VIM 9.0\0" * 20)
        # :w -- probe whether the folder is writable ("4913"), then rename-backup-write
        fd = os.open(d / "4913", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o100644)
        os.fchown(fd, os.getuid(), os.getgid())
        os.close(fd)
        os.unlink(d / "4913")
        os.rename(d / "php-beta-release.md", d / "php-beta-release.md~")
        _write(d / "php-beta-release.md", text + ADDED)
        os.chmod(d / "php-beta-release.md", 0o644)
        os.unlink(d / "php-beta-release.md~")
        # :q
        os.unlink(swp)
        h.settle(b)
        _check_one_update(h, fake_embedder, scratch, n, p)


def test_emacs_lock_backup_and_autosave(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    """emacs: a dangling ``.#name`` lock symlink, ``#name#`` autosave, ``name~`` backup."""
    d = tree / "blog/2023"
    with Harness(tree, scratch / "state", fake_embedder) as h:
        n, p, b = len(fake_embedder.texts), len(h.applied), h.service.batches_done
        text = (tree / PAGE).read_text()
        # first modification of the buffer: the lock, a dangling symlink
        os.symlink("tester@host.12345:1700000000", d / ".#php-beta-release.md")
        # auto-save after a while
        _write(d / "#php-beta-release.md#", text + ADDED[:20])
        _write(d / "#php-beta-release.md#", text + ADDED)
        # C-x C-s: first save of the session renames the original to the backup
        os.rename(d / "php-beta-release.md", d / "php-beta-release.md~")
        _write(d / "php-beta-release.md", text + ADDED)
        os.unlink(d / "#php-beta-release.md#")
        os.unlink(d / ".#php-beta-release.md")
        h.settle(b)
        assert (d / "php-beta-release.md~").exists()  # emacs keeps its backup
        _check_one_update(h, fake_embedder, scratch, n, p)


@pytest.mark.parametrize(
    "temp_name",
    [
        ".php-beta-release.md.tmp",  # an ignored temporary (many tools)
        ".goutputstream-X1Y2Z3",  # gedit / GIO
        "php-beta-release.md.4f2a.part",
        "tmp-9x8y7z.md",  # a temporary the include globs accept: gone at batch time
    ],
)
def test_write_temp_then_rename_over(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder, temp_name: str
) -> None:
    d = tree / "blog/2023"
    with Harness(tree, scratch / "state", fake_embedder) as h:
        n, p, b = len(fake_embedder.texts), len(h.applied), h.service.batches_done
        text = (tree / PAGE).read_text()
        _write(d / temp_name, text + ADDED)
        os.rename(d / temp_name, d / "php-beta-release.md")
        h.settle(b)
        _check_one_update(h, fake_embedder, scratch, n, p)


def test_save_with_unchanged_content_embeds_nothing(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    """``:w`` without changes: new inode and mtime, same bytes -> only the stat is updated."""
    d = tree / "blog/2023"
    with Harness(tree, scratch / "state", fake_embedder) as h:
        n, p, b = len(fake_embedder.texts), len(h.applied), h.service.batches_done
        text = (tree / PAGE).read_text()
        os.rename(d / "php-beta-release.md", d / "php-beta-release.md~")
        _write(d / "php-beta-release.md", text)
        os.unlink(d / "php-beta-release.md~")
        h.settle(b)
        assert fake_embedder.texts[n:] == []
        assert h.paths_applied(p) == []
        assert [s for plan in h.applied[p:] for s, _ in plan.stat_only] == [PAGE]
        h.assert_matches_oracle(scratch)


@pytest.mark.parametrize(
    "name",
    [
        "php-beta-release.md___jb_tmp___",  # JetBrains safe write
        "php-beta-release.md___jb_old___",
        "php-beta-release.md.vsctmp",  # VS Code atomic write
        "php-beta-release.md.crswap",  # Chromium's File System Access write
        "~$php-beta-release.md",  # Microsoft Office owner file
        ".~lock.php-beta-release.md#",  # LibreOffice lock
        ".php-beta-release.md.swp",  # vim
        "#php-beta-release.md#",  # emacs autosave
    ],
)
def test_editor_temporaries_are_never_documents_under_any_include(
    tmp_path: Path, name: str
) -> None:
    from ingestd.daemon.config import SourceConfig
    from ingestd.daemon.sources.filter import SourceFilter

    everything = SourceFilter(SourceConfig(name="d", root=tmp_path, include=("**/*",)))
    assert not everything.accepts(f"blog/2023/{name}")
    assert everything.accepts("blog/2023/php-beta-release.md")
    # named exactly, a file of such a name is a document ("#" starts a comment in
    # gitignore syntax: "\#" names it)
    entry = "\\" + name if name.startswith("#") else name
    named = SourceFilter(SourceConfig(name="d", root=tmp_path, include=("**/*.md", entry)))
    assert named.accepts(name) and named.accepts(f"blog/2023/{name}")


def test_jetbrains_safe_write_under_an_include_of_everything(
    tree: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    """JetBrains: write ``name___jb_tmp___``, rename the file to ``name___jb_old___``,
    the temporary to the file, delete the old one; a slow save lets a batch in between."""
    d = tree / "blog/2023"
    config = scratch / "all.yaml"
    config.write_text(f"sources:\n  - root: {tree}\n    include: ['**/*']\n")
    with Harness(tree, scratch / "state-all", fake_embedder, config_path=config) as h:
        b = h.service.batches_done
        text = (tree / PAGE).read_text()
        _write(d / "php-beta-release.md___jb_tmp___", text + ADDED)
        # a change of another page after it: once that is applied, the temporary's
        # events were handled too (they came first), and it is still no document
        other = tree / PAGES[1]
        _write(other, other.read_text() + "\nA line that marks a batch.\n")
        h.settle(b)
        paths = {pt["path"] for pt in h.points().values()}
        assert not any("___jb_" in path for path in paths)
        n, p, b = len(fake_embedder.texts), len(h.applied), h.service.batches_done
        os.rename(d / "php-beta-release.md", d / "php-beta-release.md___jb_old___")
        os.rename(d / "php-beta-release.md___jb_tmp___", d / "php-beta-release.md")
        os.unlink(d / "php-beta-release.md___jb_old___")
        h.settle(b)
        assert not any("___jb_" in pt["path"] for pt in h.points().values())
        _check_one_update(h, fake_embedder, scratch, n, p)
