"""Operators' commands agree with the daemon: what each command does to a state it shares.

Each case is one an operator met: a source's volume unmounted while every command is
given the daemon's ``--config``, ``forget`` of a source the daemon still watches, hard
links edited under one name, two sources over the same files, a checkout that took
files away and gave them back. The commands run for real: ``CliRunner`` in this
process, against the state dir or a real :class:`~ingestd.daemon.service.service.Service`
running in a thread (:class:`~tests.daemon.harness.Harness`, whose control socket the
commands reach as they reach ``ingestd run``'s). Vectors are fake: ids and payload do
not depend on them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ingestd.daemon.cli.main import cli
from ingestd.daemon.config import load_config
from ingestd.daemon.engine import Engine
from tests.daemon.harness import FAST_WATCH, Harness
from tests.helpers import (
    REPO,
    CountingEmbedder,
    assert_matches_oracle,
    copy_tree,
    fake_vectors,
    run_cli,
    store_snapshot,
    wait_for,
)

PAGES = ("docs/concepts/glossary.md", "docs/collector/deploy/gateway.md")


def _config(tmp: Path, sources: str) -> Path:
    """A config file with the ``sources:`` block ``sources`` (YAML, indented 2)."""
    f = tmp / "ingestd.yaml"
    f.write_text(f"sources:\n{sources}")
    return f


def _ingest(cfg_file: Path, state: Path) -> None:
    """Every configured source indexed from scratch (fake vectors)."""
    eng = Engine(load_config(cfg_file), state, embed_model=fake_vectors)
    try:
        for name in eng.context.sources:
            eng.sync(name)
    finally:
        eng.close()


def _cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _daemon_points(h: Harness) -> dict[str, dict[str, Any]]:
    """Every point of the running daemon's store, read on its engine thread."""
    return dict(h.call(lambda e: dict(e.resources.store.scroll("ingestd"))))


def _documents(state: Path, source: str) -> int:
    st = json.loads(_cli("status", "--state-dir", str(state), "--json").stdout)
    return int(next(s["documents"] for s in st["sources"] if s["source"] == source))


# -- a missing root is a state, not a configuration error ---------------------------------------


def test_every_command_reports_a_missing_root_and_deletes_nothing(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "vol" / "docs", PAGES)
    cfg = _config(tmp_path, f"  - name: docs\n    root: {root}\n")
    state = tmp_path / "state"
    _ingest(cfg, state)
    before = store_snapshot(state)
    n_docs = _documents(state, "docs")
    root.rename(tmp_path / "vol" / "elsewhere")  # the volume is unmounted
    common = ["--config", str(cfg), "--state-dir", str(state)]

    st = _cli("status", *common)
    assert st.exit_code == 0, st.output
    assert f"ROOT MISSING: {root} is not a folder" in st.output
    found = _cli("search", *common, "--mode", "sparse", "collector gateway")
    assert found.exit_code == 0, found.output
    assert "docs/collector/deploy/gateway.md" in found.output
    for args in (["resync"], ["resync", "--dry-run"], ["verify"], ["verify", "--repair"]):
        res = _cli(*args, *common)
        assert "invalid configuration" not in res.output
        assert res.exit_code == 1, (args, res.output)
        assert "missing" in res.output.lower(), (args, res.output)
    assert "nothing synced or deleted" in _cli("resync", *common).output
    assert "ROOT MISSING" in _cli("verify", *common).output
    assert store_snapshot(state) == before  # not one point deleted
    assert _documents(state, "docs") == n_docs

    (tmp_path / "vol" / "elsewhere").rename(root)  # mounted again
    assert _cli("verify", *common).exit_code == 0
    assert _cli("resync", *common).exit_code == 0


def test_a_missing_root_given_as_path_is_reported_and_a_typo_refused(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "vol" / "docs", PAGES)
    state = tmp_path / "state"
    eng = Engine(load_config(None, roots=[str(root)]), state, embed_model=fake_vectors)
    try:  # the source `ingestd resync PATH` makes
        for name in eng.context.sources:
            eng.sync(name)
    finally:
        eng.close()
    before = store_snapshot(state)
    root.rename(tmp_path / "vol" / "elsewhere")  # the volume is unmounted
    for args in (["verify"], ["resync"], ["resync", "--dry-run"]):
        res = _cli(*args, "--state-dir", str(state), str(root))
        assert "does not exist" not in res.output, (args, res.output)
        assert res.exit_code == 1 and "missing" in res.output.lower(), (args, res.output)
    typo = _cli("verify", "--state-dir", str(state), str(tmp_path / "vol" / "dcos"))
    assert typo.exit_code == 2 and "no such folder" in typo.output, typo.output
    assert store_snapshot(state) == before


def test_commands_through_the_daemon_report_a_missing_root(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "vol" / "docs", PAGES)
    cfg = _config(tmp_path, f"  - name: docs\n    root: {root}\n")
    state = tmp_path / "state"
    with Harness(root, state, CountingEmbedder(fake_vectors), config_path=cfg) as h:
        root.rename(tmp_path / "vol" / "elsewhere")
        wait_for(lambda: h.service.status()["daemon"]["missing_roots"], 10, "the daemon to see it")
        common = ["--config", str(cfg), "--state-dir", str(state)]
        st = _cli("status", *common)
        assert "invalid configuration" not in st.output
        assert st.exit_code == 1 and "missing root" in st.output  # unhealthy while it is
        res = _cli("resync", *common)
        assert res.exit_code == 1 and "nothing synced or deleted" in res.output, res.output
        res = _cli("verify", *common, "--repair")
        assert res.exit_code == 1 and "ROOT MISSING" in res.output, res.output
        assert h.call(lambda e: e.resources.manifest.counts("docs"))["documents"] == len(PAGES)


# -- overlapping roots, include globs that match nothing -----------------------------------------


@pytest.mark.parametrize(
    ("inner", "named"),
    [("docs/docs/collector", "is inside"), ("docs", "is also the root of sources[0]")],
)
def test_overlapping_roots_are_refused_naming_both(tmp_path: Path, inner: str, named: str) -> None:
    copy_tree(tmp_path / "docs", PAGES)
    cfg = _config(
        tmp_path, f"  - name: outer\n    root: docs\n  - name: inner\n    root: {inner}\n"
    )
    state = tmp_path / "state"
    for command in ("resync", "run", "status", "search"):
        args = [command, "--config", str(cfg), "--state-dir", str(state)]
        res = _cli(*args, *(["a question"] if command == "search" else []))
        assert res.exit_code == 2, (command, res.output)
        assert f"sources[1].root: {tmp_path / inner} {named}" in res.output, res.output
        assert str(tmp_path / "docs") in res.output and "indexed" in res.output
    assert not (state / "manifest.db").exists()
    if inner != "docs":  # one folder given twice is one source
        paths = [str(tmp_path / "docs"), str(tmp_path / inner)]
        res = _cli("resync", "--state-dir", str(state), *paths)
        assert res.exit_code == 2, res.output
        assert f"PATH {tmp_path / inner}: {tmp_path / inner} is inside" in res.output


def test_an_inner_root_the_outer_source_excludes_is_indexed_once(tmp_path: Path) -> None:
    copy_tree(tmp_path / "docs", PAGES)
    inner = tmp_path / "docs" / "docs" / "collector"
    cfg = _config(
        tmp_path,
        "  - name: outer\n    root: docs\n    exclude: ['docs/collector/']\n"
        f"  - name: inner\n    root: {inner}\n",
    )
    state = tmp_path / "state"
    _ingest(cfg, state)
    paths = sorted((p["source"], p["path"]) for p in store_snapshot(state).values())
    assert {s for s, _ in paths} == {"outer", "inner"}
    assert ("inner", "deploy/gateway.md") in paths
    assert not [p for s, p in paths if s == "outer" and p.startswith("docs/collector/")]


def test_a_source_left_in_the_state_that_overlaps_a_configured_one_is_warned_about(
    tmp_path: Path,
) -> None:
    """``docs`` indexed by an older config, ``docs/collector`` configured now: the files
    below it are indexed twice until the old source is forgotten."""
    root = copy_tree(tmp_path / "docs", PAGES)
    inner = root / "docs" / "collector"
    state = tmp_path / "state"
    _ingest(_config(tmp_path, f"  - name: docs\n    root: {root}\n"), state)
    cfg = _config(tmp_path, f"  - name: collector\n    root: {inner}\n")
    _ingest(cfg, state)
    gateway = [p for p in store_snapshot(state).values() if p["path"].endswith("gateway.md")]
    assert {p["source"] for p in gateway} == {"docs", "collector"}  # each chunk twice
    said = f"the files under {inner} are indexed by source"
    st = _cli("status", "--state-dir", str(state))  # no daemon: read from the manifest
    assert st.exit_code == 0, st.output
    assert f"warning: {said} collector too" in st.output
    assert f"warning: {said} docs too" in st.output
    with Harness(inner, state, CountingEmbedder(fake_vectors), config_path=cfg) as h:
        warned = {s["source"]: s["warnings"] for s in h.service.status()["sources"]}
        assert any(said in w for w in warned["docs"]), warned
        assert any(said in w for w in warned["collector"]), warned
        res = _cli("forget", "--state-dir", str(state), "docs")  # not configured: allowed
        assert res.exit_code == 0, res.output
        st = json.loads(_cli("status", "--state-dir", str(state), "--json").stdout)
        assert [(s["source"], s["warnings"]) for s in st["sources"]] == [("collector", [])]
        assert _cli("verify", "--state-dir", str(state)).exit_code == 0
    # an outer source that excludes the inner root shares no file with it: no warning
    _ingest(
        _config(tmp_path, f"  - name: docs\n    root: {root}\n    exclude: ['docs/collector/']\n"),
        state,
    )
    st = json.loads(_cli("status", "--state-dir", str(state), "--json").stdout)
    assert {s["source"]: s["warnings"] for s in st["sources"]} == {"collector": [], "docs": []}


def test_include_globs_that_match_nothing_are_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = copy_tree(tmp_path / "docs", PAGES)
    cfg = _config(tmp_path, f"  - name: docs\n    root: {root}\n    include: ['*.adoc']\n")
    state = tmp_path / "state"
    warning = f"no file under {root} matches its include globs (*.adoc)"
    with caplog.at_level("WARNING", "ingestd"):
        with Harness(root, state, CountingEmbedder(fake_vectors), config_path=cfg) as h:
            assert warning in caplog.text  # at start
            (src,) = h.service.status()["sources"]
            assert src["warnings"] == [warning]
            st = _cli("status", "--state-dir", str(state))
            assert f"warning: {warning}" in st.output
            (root / "guide.adoc").write_text("= Guide\n\nNow one file matches.\n")
            wait_for(lambda: h.service.status()["sources"][0]["documents"], 30, "the new file")
            h.call(lambda e: e.sync("docs"))  # a scan: the warning goes
            assert h.service.status()["sources"][0]["warnings"] == []
    (root / "guide.adoc").unlink()
    res = _cli("resync", "--config", str(cfg), "--state-dir", str(state))
    assert res.exit_code == 0, res.output
    st = _cli("status", "--state-dir", str(state))  # no daemon: read from the manifest
    assert "warning: no file under" in st.output and "matched its include globs" in st.output


# -- forget never leaves a watched source with nothing indexed -----------------------------------


def test_forget_refuses_a_source_the_daemon_watches_until_it_is_reloaded_without_it(
    tmp_path: Path,
) -> None:
    docs = copy_tree(tmp_path / "docs", PAGES)
    other = copy_tree(tmp_path / "other", ("docs/concepts/glossary.md",))
    both = f"  - name: docs\n    root: {docs}\n  - name: other\n    root: {other}\n"
    cfg = _config(tmp_path, both)
    state = tmp_path / "state"
    common = ["--state-dir", str(state)]
    with Harness(docs, state, CountingEmbedder(fake_vectors), config_path=cfg) as h:
        n_docs = _documents(state, "docs")
        res = _cli("forget", *common, "docs")
        assert res.exit_code == 2, res.output
        assert "source docs is configured in the running daemon" in res.output
        assert "reload the daemon" in res.output
        assert _documents(state, "docs") == n_docs  # nothing was deleted
        assert _cli("verify", *common).exit_code == 0

        cfg.write_text(f"sources:\n  - name: other\n    root: {other}\n")
        h.service.request_reload()
        wait_for(lambda: h.service.reloads == 1 and h.service.idle(), 30, "the reload")
        res = _cli("forget", *common, "docs")
        assert res.exit_code == 0, res.output
        assert "forgot docs: " in res.output and " 0 points" not in res.output
        st = json.loads(_cli("status", *common, "--json").stdout)
        assert [s["source"] for s in st["sources"]] == ["other"]
        assert st["daemon"]["healthy"]
        assert _cli("verify", *common).exit_code == 0
        assert {p["source"] for p in _daemon_points(h).values()} == {"other"}


def test_forget_without_a_daemon_refuses_a_source_of_the_config_given(tmp_path: Path) -> None:
    docs = copy_tree(tmp_path / "docs", PAGES)
    cfg = _config(tmp_path, f"  - name: docs\n    root: {docs}\n")
    state = tmp_path / "state"
    _ingest(cfg, state)
    res = _cli("forget", "--config", str(cfg), "--state-dir", str(state), "docs")
    assert res.exit_code == 2 and "remove it from the config first" in res.output, res.output
    assert _documents(state, "docs") == len(PAGES)
    res = _cli("forget", "--state-dir", str(state), "docs")  # the config is not in force
    assert res.exit_code == 0, res.output
    assert store_snapshot(state) == {}


# -- deletions held by the guard are released when the files are back --------------------------


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip()


def test_held_deletions_end_when_a_checkout_brings_the_files_back(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    for i in range(30):
        (root / "docs" / f"page{i:02}.md").write_text(f"# Page {i}\n\nText of page {i}.\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "thirty pages")
    _git(root, "checkout", "-q", "-b", "slim")
    _git(root, "rm", "-q", *[f"docs/page{i:02}.md" for i in range(3, 30)])
    _git(root, "commit", "-q", "-m", "three pages")
    _git(root, "checkout", "-q", "main")
    state = tmp_path / "state"
    common = ["--state-dir", str(state)]
    embed = CountingEmbedder(fake_vectors)
    with Harness(root, state, embed):
        pass  # thirty pages indexed
    _git(root, "checkout", "-q", "slim")  # while the daemon is stopped
    with Harness(root, state, embed) as h:
        st = json.loads(_cli("status", *common, "--json").stdout)
        assert st["sources"][0]["held_deletes"] == 27  # the start-up scan held them
        before = h.service.batches_done
        _git(root, "checkout", "-q", "main")
        h.settle(before)
        wait_for(lambda: h.service.idle(), 30, "idle")
        st = json.loads(_cli("status", *common, "--json").stdout)
        assert st["sources"][0]["held_deletes"] == 0, st["sources"][0]
        assert st["sources"][0]["documents"] == 30
        assert "mass-deletion guard" not in _cli("status", *common).output
    with sqlite3.connect(state / "manifest.db") as db:
        assert db.execute("SELECT held_deletes FROM sources").fetchall() == [(0,)]
    assert_matches_oracle(root, state, tmp_path, fake_vectors)


# -- hard links: every name of a changed file is synced ------------------------------------------


def _texts(h: Harness) -> dict[str, str]:
    """Path -> the text of its chunks, as the running daemon's store holds them."""
    out: dict[str, str] = {}
    for p in sorted(h.points().values(), key=lambda p: (p["path"], p["ordinal"])):
        out[p["path"]] = out.get(p["path"], "") + p["text"]
    return out


def _append(f: Path, text: str) -> None:
    with f.open("a") as out:
        out.write(f"\n{text}\n")


def test_a_write_through_one_name_reaches_the_other_names_in_its_batch(tmp_path: Path) -> None:
    """The stat check is off: only the batch of the name written carries the others,
    also a name linked while the daemon runs to a file indexed with one name."""
    root = copy_tree(tmp_path / "docs", PAGES)
    a = root / "a.md"
    a.write_text("# A\n\nThe first text of a file with two names.\n")
    os.link(a, root / "b.md")  # a second name in the root: no event when a.md is written
    (root / "c.md").write_text("# C\n\nA file with one name when the daemon starts.\n")
    state = tmp_path / "state"
    watch = {**FAST_WATCH, "hard_link_check_s": 0}
    with Harness(root, state, CountingEmbedder(fake_vectors), watch=watch) as h:
        before, plans = h.service.batches_done, len(h.applied)
        _append(a, "Appended through the name a.md.")
        h.settle(before, timeout=10)
        assert "Appended through the name a.md." in _texts(h)["b.md"]
        assert {"a.md", "b.md"} <= set(h.paths_applied(plans))
        # a name made now: its event is a batch of d.md alone, which finds c.md
        before = h.service.batches_done
        os.link(root / "c.md", root / "d.md")
        h.settle(before, timeout=10)
        before = h.service.batches_done
        _append(root / "d.md", "Appended through the new name d.md.")
        h.settle(before, timeout=10)
        assert "Appended through the new name d.md." in _texts(h)["c.md"]
        res = _cli("verify", "--state-dir", str(state))
        assert res.exit_code == 0, res.output
        h.assert_matches_oracle(tmp_path)


def test_a_write_through_a_name_outside_the_root_is_indexed_within_seconds(
    tmp_path: Path,
) -> None:
    """No event at all: the stat check of the linked documents (default period) finds it."""
    root = copy_tree(tmp_path / "docs", PAGES)
    outside = tmp_path / "elsewhere" / "x.md"
    outside.parent.mkdir()
    outside.write_text("# X\n\nA file whose other name is outside the root.\n")
    os.link(outside, root / "x.md")
    state = tmp_path / "state"
    with Harness(root, state, CountingEmbedder(fake_vectors)) as h:  # rescan_interval_s 0
        assert h.service.cfg.watch.hard_link_check_s == 5
        _append(outside, "Appended outside the root.")
        wait_for(
            lambda: "Appended outside the root." in _texts(h).get("x.md", ""),
            15,
            "the write outside the root in the store",
        )
        h.settle(timeout=10)
        res = _cli("verify", "--state-dir", str(state))
        assert res.exit_code == 0, res.output
        h.assert_matches_oracle(tmp_path)


# -- what the watch errors say ----------------------------------------------------------------


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = "echo 1 > /proc/sys/user/max_inotify_watches"
    cmd = ["unshare", "--user", "--map-root-user", "sh", "-c", probe]
    return subprocess.run(cmd, capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare(), reason="needs user namespaces (unshare --user)")
def test_the_watch_limit_of_a_user_namespace_is_the_one_named(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    for i in range(40):
        (root / f"part{i:02}").mkdir(parents=True)
        (root / f"part{i:02}" / "page.md").write_text(f"# Part {i}\n\nSome text.\n")
    state = tmp_path / "state"
    limit = 20  # this namespace's limit; fs.inotify.max_user_watches stays far above
    script = f'echo {limit} > /proc/sys/user/max_inotify_watches && exec "$@"'
    daemon = subprocess.Popen(
        ["unshare", "--user", "--map-root-user", "sh", "-c", script, "sh", sys.executable,
         "-m", "tests.faults.fakecli", "run", "--state-dir", str(state), str(root)],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:

        def unwatched() -> Any:
            st = run_cli("status", "--state-dir", str(state), "--json", timeout=60)
            srcs = json.loads(st.stdout)["sources"] if st.stdout.startswith("{") else []
            return srcs and srcs[0].get("unwatched_folders")

        folders = wait_for(unwatched, 120, "folders the limit left unwatched", interval=1)
        reason = folders[0]["reason"]
        assert reason == f"the inotify watch limit is reached (user.max_inotify_watches = {limit})"
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    errors = [line for line in err.splitlines() if "cannot watch" in line]
    assert errors and "Raise user.max_inotify_watches (e.g. `sysctl -w" in errors[0], err
    assert "fs.inotify.max_user_watches" not in err


def test_a_folder_the_daemon_may_not_read_is_not_blamed_on_the_watch_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = tmp_path / "docs" / "secret"
    secret.mkdir(parents=True)
    secret.chmod(0o700)
    probe = (
        "import os, sys\n"
        "from ingestd.daemon.watch import watched\n"
        "watched.add_watch_errno(sys.argv[1])  # loads libc while it can\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "print(watched.reason_for(watched.add_watch_errno(sys.argv[1])))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(secret)], capture_output=True, text=True, check=True
    )
    reason = out.stdout.strip()
    assert reason == "permission denied"  # EACCES, told apart from ENOSPC

    from ingestd.daemon.watch.coverage import WatchCoverage

    with caplog.at_level("ERROR", "ingestd"):
        WatchCoverage(60).update("docs", {"secret": reason})
    assert "cannot watch 1 folder(s), e.g. secret/ (permission denied)" in caplog.text
    assert "Let the daemon's user read and enter those folders" in caplog.text
    assert "max_user_watches" not in caplog.text and "max_inotify_watches" not in caplog.text
