"""Each git source has a mirror of its own, found again under the same name, against real git.

Two sources whose names differ only in characters a folder name cannot hold (``my book``
and ``my_book``) once shared one mirror folder: each fetch replaced the other's refs,
and the first source's ``verify`` failed. A mirror folder is now unique per source
name and the same for the same name; a mirror made under the former naming is found
and moved to its new folder when its source is opened, its objects kept (nothing
fetched again, even with the server away).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from ingestd.daemon.sources.git import GitSource
from ingestd.daemon.sources.mirror import legacy_mirror_dir, mirror_dir
from tests.gitrepos import HistoryRepo, git
from tests.helpers import fake_vectors, store_snapshot, without_provenance


def _config(state: Path, sources: dict[str, str]) -> Any:
    """Git sources ``name -> url``, each indexing ``main``."""
    return load_config(
        None,
        overrides={
            "state_dir": str(state),
            "sources": [
                {"kind": "git", "name": n, "url": u, "refs": ["main"]} for n, u in sources.items()
            ],
        },
    )


def _sync(state: Path, sources: dict[str, str]) -> dict[str, Any]:
    """Fetch and sync every source in a fresh engine; ``verify`` must be clean for each."""
    eng = Engine(_config(state, sources), state, embed_model=fake_vectors)
    try:
        out = {}
        for name in sources:
            src = eng.context.source(name)
            assert isinstance(src, GitSource)
            src.refresh()
            out[name] = eng.sync(name)
        for name in sources:
            report = eng.verify(name)
            assert report.clean, (name, report.as_dict())
        return out
    finally:
        eng.close()


def _two_repos(tmp: Path) -> tuple[HistoryRepo, HistoryRepo]:
    """Two repositories with different text: the first chapters, and chapter 3."""
    first = HistoryRepo(tmp / "first", prefixes=("src/ch01-",))
    first.push()
    second = HistoryRepo(tmp / "second", prefixes=("src/ch03-0",))
    second.push()
    return first, second


def _object_files(mirror: Path) -> set[int]:
    """Inodes of the mirror's object files (loose objects and objects)."""
    return {p.stat().st_ino for p in (mirror / "objects").rglob("*") if p.is_file()}


def test_sources_whose_names_fold_together_have_mirrors_of_their_own(tmp_path: Path) -> None:
    first, second = _two_repos(tmp_path)
    sources = {"my book": str(first.origin), "my_book": str(second.origin)}
    state = tmp_path / "state"
    _sync(state, sources)
    assert mirror_dir(state, "my book") != mirror_dir(state, "my_book")
    assert mirror_dir(state, "my book") == mirror_dir(state, "my book")  # stable
    assert all(mirror_dir(state, n).parent == state / "git" for n in sources)
    # each source's points are its own repository's, and a second sync changes nothing
    points = without_provenance(store_snapshot(state))
    paths = {n: {p["path"] for p in points.values() if p["source"] == n} for n in sources}
    assert paths["my book"] == set(first.files())
    assert paths["my_book"] == set(second.files())
    again = _sync(state, sources)
    assert all(r.indexed == 0 and r.deleted == 0 for r in again.values())


def test_names_a_folder_cannot_hold_get_distinct_stable_folders(tmp_path: Path) -> None:
    names = ["my book", "my_book", "my/book", "my.book", ".my_book", "my_book.", "é", "e", "_"]
    folders = [mirror_dir(tmp_path, n) for n in names]
    assert len(set(folders)) == len(names)
    assert folders == [mirror_dir(tmp_path, n) for n in names]
    long = "x" * 1000
    assert len(mirror_dir(tmp_path, long).name.encode()) <= 255  # a file name's limit
    assert all(f.parent == tmp_path / "git" and f.name.endswith(".git") for f in folders)


def test_a_mirror_under_the_former_name_is_moved_with_its_objects(tmp_path: Path) -> None:
    first, _ = _two_repos(tmp_path)
    url = str(first.origin)
    state = tmp_path / "state"
    sources = {"my book": url}
    _sync(state, sources)
    before = without_provenance(store_snapshot(state))
    # the mirror as the former naming placed it
    new, old = mirror_dir(state, "my book"), legacy_mirror_dir(state, "my book")
    assert old == state / "git" / "my_book.git"
    os.rename(new, old)
    objects = _object_files(old)
    assert objects
    # opened with the server away: found, moved, its refs read, nothing fetched
    hidden = tmp_path / "away.git"
    os.rename(first.origin, hidden)
    eng = Engine(_config(state, sources), state, embed_model=fake_vectors)
    try:
        src = eng.context.source("my book")
        assert isinstance(src, GitSource)
        assert src.root == new and not old.exists()
        assert _object_files(new) == objects  # the same files: moved, not fetched again
        assert src.missing() is None
        assert src.commit_of("main") == git(first.work, "rev-parse", "main").strip()
        assert eng.sync("my book").indexed == 0  # the store is what it was
    finally:
        eng.close()
    os.rename(hidden, first.origin)
    assert without_provenance(store_snapshot(state)) == before
    # the next fetch goes on from there
    first.next_commit()
    first.push()
    res = _sync(state, sources)
    assert res["my book"].indexed > 0 and not old.exists()
    assert objects <= _object_files(new)
