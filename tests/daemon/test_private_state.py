"""State is private (folders 0700, files 0600, whatever the umask); no shared socket folder.

A state dir holds every indexed chunk's text (the manifest's paths, the store's
payload, the embedding cache). Before this was pinned, a run under umask 022 left the
manifest and the store world-readable, and another user who created a folder named
like the daemon's fallback socket in the system temp dir stopped the daemon from
starting.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingestd.daemon.service.control import ControlServer
from ingestd.daemon.statedir import (
    InsecureDirError,
    check_private_dir,
    make_private_dir,
    private_runtime_dir,
    secure_state_dir,
)
from ingestd.daemon.wire.location import socket_path_for
from ingestd.daemon.wire.protocol import request
from ingestd.daemon.wire.statelock import StateLock
from tests.helpers import copy_tree, ingestd_cmd, run_cli, store_folder, wait_for

NOBODY = 65534


def _open_modes(top: Path) -> list[str]:
    """Entries under ``top`` (itself included) that group or others may use."""
    bad = []
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [".", *dirnames, *filenames]:
            p = Path(dirpath) / name
            st = p.lstat()
            if stat.S_ISSOCK(st.st_mode):
                continue  # 0660 on purpose; the private folder around it decides
            if st.st_mode & 0o077:
                bad.append(f"{p.relative_to(top)} {stat.S_IMODE(st.st_mode):04o}")
    return bad


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in for the system temp dir (world-writable, sticky), for this test only.

    Short, like ``/tmp``: a Unix socket path holds at most 107 bytes.
    """
    shared = Path(tempfile.mkdtemp(prefix="t-"))
    os.chmod(shared, 0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    try:
        yield shared
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.slow
def test_a_run_under_umask_022_leaves_nothing_readable_by_others(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "docs", ("docs/concepts/glossary.md",))
    state = tmp_path / "var" / "state"  # its parent is created too
    env = {**os.environ, "INGESTD_STATE_DIR": ""}
    env.pop("RUNTIME_DIRECTORY", None)
    proc = subprocess.Popen(
        [*ingestd_cmd(), "run", "--state-dir", str(state), str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: os.umask(0o022),
    )
    try:

        def watching() -> bool:
            st = run_cli("status", "--state-dir", str(state), "--json", timeout=60)
            return (
                st.returncode == 0
                and (json.loads(st.stdout)["daemon"] or {}).get("phase") == "watching"
            )

        wait_for(watching, 240, "the first reconcile")
        assert store_folder(state).is_dir() and (state / "embeddings.db").is_file()
        assert _open_modes(tmp_path / "var") == []
        sock = Path((state / "control-socket").read_text().strip())
        assert sock.parent == state  # inside the private state dir
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]


def test_lock_and_pointer_are_private_whatever_the_umask(tmp_path: Path, loose_umask: None) -> None:
    state = tmp_path / "a" / "state"
    lock = StateLock(state)
    lock.acquire("test")
    server = ControlServer(state, lambda cmd, args: {"cmd": cmd})
    server.start()
    try:
        assert request(state, "ping") == {"cmd": "ping"}
        assert _open_modes(tmp_path / "a") == []
        assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o660
    finally:
        server.close()
        lock.release()


def test_an_old_state_dir_is_made_private_when_locked(tmp_path: Path, loose_umask: None) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    for name in ("manifest.db", "manifest.db-wal", "embeddings.db", "control-socket"):
        (state / name).write_text("x")
        os.chmod(state / name, 0o644)
    (state / "qdrant" / "collection").mkdir(parents=True)
    os.chmod(state / "qdrant", 0o755)
    (state / "notes.txt").write_text("not ours")
    os.chmod(state / "notes.txt", 0o644)
    lock = StateLock(state)
    lock.acquire("test")
    lock.release()
    for name in ("manifest.db", "manifest.db-wal", "embeddings.db", "control-socket"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE((state / "qdrant").stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "ingestd.lock").stat().st_mode) == 0o600
    assert stat.S_IMODE((state / "notes.txt").stat().st_mode) == 0o644  # not ingestd's
    assert stat.S_IMODE(state.stat().st_mode) == 0o755  # the operator's choice stays


def test_the_stores_of_an_old_state_dir_are_made_private_all_the_way_down(
    tmp_path: Path, loose_umask: None
) -> None:
    """Before, ``qdrant/`` became 0700 but its collections stayed 0755, their files 0644."""
    state = tmp_path / "state"
    inner = [
        "qdrant/collection/ingestd__v1/storage.sqlite",
        "edge/collections/ingestd__v1/wal/open-1",
        "edge/collections/ingestd__v1/segments/abc/payload_storage/page_0.dat",
    ]
    for rel in inner:
        (state / rel).parent.mkdir(parents=True, exist_ok=True)
        (state / rel).write_text("x")
    elsewhere = tmp_path / "elsewhere-edge"
    (elsewhere / "collections").mkdir(parents=True)
    (elsewhere / "edge.json").write_text("{}")
    assert _open_modes(state) and _open_modes(elsewhere)  # 0755 and 0644 under umask 022
    outside = tmp_path / "outside.md"
    outside.write_text("not ours")
    (state / "edge" / "link.md").symlink_to(outside)  # a link is not followed
    lock = StateLock(state)
    lock.acquire("test")
    lock.release()
    secure_state_dir(state, [elsewhere])
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
    (state / "edge" / "link.md").unlink()  # a link's own mode is always 0777
    assert _open_modes(state / "qdrant") == [] and _open_modes(state / "edge") == []
    assert _open_modes(elsewhere) == []


def test_make_private_dir_creates_every_missing_folder_0700(
    tmp_path: Path, loose_umask: None
) -> None:
    make_private_dir(tmp_path / "x" / "y" / "z")
    for p in (tmp_path / "x", tmp_path / "x" / "y", tmp_path / "x" / "y" / "z"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700
    assert secure_state_dir(tmp_path / "new") == tmp_path / "new"
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700


def test_socket_fallback_is_a_private_per_user_folder(
    tmp_path: Path, private_tmp: Path, loose_umask: None
) -> None:
    long_state = tmp_path / ("s" * 120)
    path = socket_path_for(long_state, env={})
    assert path.parent == private_tmp / f"ingestd-{os.getuid()}"
    check_private_dir(path.parent)
    # a private XDG_RUNTIME_DIR is preferred; a shared one is not used
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    assert socket_path_for(long_state, env={"XDG_RUNTIME_DIR": str(xdg)}).parent == xdg
    os.chmod(xdg, 0o777)
    assert socket_path_for(long_state, env={"XDG_RUNTIME_DIR": str(xdg)}).parent != xdg
    # systemd's runtime dir wins over everything
    env = {"RUNTIME_DIRECTORY": "/run/ingestd"}
    assert socket_path_for(long_state, env=env) == Path("/run/ingestd/ingestd.sock")


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_another_user_squatting_the_fallback_cannot_stop_the_daemon(
    tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
    long_state = tmp_path / ("s" * 120)
    long_state.mkdir()
    # the other user pre-creates the per-user folder, open to all, with a folder named
    # like the socket inside
    squat = private_tmp / f"ingestd-{os.getuid()}"
    squat.mkdir()
    os.chmod(squat, 0o777)
    digest = hashlib.sha256(os.fsencode(long_state.absolute())).hexdigest()[:16]
    tag = f"ingestd-{digest}.sock"
    for folder in (squat / tag, private_tmp / tag):  # and the name the socket once had
        folder.mkdir()
        os.chown(folder, NOBODY, NOBODY)
    os.chown(squat, NOBODY, NOBODY)
    with pytest.raises(InsecureDirError, match="belongs to uid"):
        check_private_dir(squat)
    server = ControlServer(long_state, lambda cmd, args: "pong")
    server.start()
    try:
        assert not server.path.is_relative_to(squat)
        check_private_dir(server.path.parent)
        assert request(long_state, "ping") == "pong"
    finally:
        server.close()
    assert not server.path.parent.exists()  # the one-off folder is removed
    assert private_runtime_dir({}) != squat


def test_operators_without_access_to_the_state_dir_use_the_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    make_private_dir(state)
    lock = StateLock(state)
    lock.acquire("ingestd run")
    status = {"state_dir": str(state), "sources": [], "daemon": {"pid": 1, "healthy": True}}
    server = ControlServer(state, lambda cmd, args: status)
    server.start()
    try:
        res = run_cli("status", "--socket", str(server.path), "--json", "--state-dir", "/nope")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["daemon"]["pid"] == 1
        env = {"INGESTD_SOCKET": str(server.path)}
        res = run_cli("sources", "--state-dir", "/nope", env=env)
        assert res.returncode == 0 and res.stdout.strip() == "no sources", res.stderr
    finally:
        server.close()
        lock.release()
    res = run_cli("status", "--socket", str(server.path), "--state-dir", "/nope")
    assert res.returncode == 1 and f"no ingestd daemon answers on {server.path}" in res.stderr
