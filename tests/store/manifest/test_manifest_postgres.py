"""The manifest on a real PostgreSQL (any SQLAlchemy URL is allowed; DESIGN.md point 3).

The server: ``$INGESTD_TEST_POSTGRES_URL`` (an SQLAlchemy URL of a database whose
owner may create databases) when set; else a throwaway cluster started here from
Debian's ``postgresql`` package (``initdb`` + ``pg_ctl``, run as the ``postgres`` user
when the tests run as root), listening on 127.0.0.1 only with its socket in a temp
dir, and removed afterwards. Skipped when neither is available or psycopg is not
installed (``pip install -e '.[test,postgres]'``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    CountingEmbedder,
    assert_matches_oracle,
    copy_tree,
    fake_vectors,
    make_engine,
)

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (extra 'postgres')")

PAGES = (
    "blog/2023/php-beta-release.md",
    "blog/2023/integrations.md",
    "community/end-user/otel-in-practice.md",
    "blog/2026/otel-graduates.md",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw)


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    """A libpq URL of a PostgreSQL server usable by these tests."""
    url = os.environ.get("INGESTD_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.skip("no PostgreSQL server binaries (Debian package 'postgresql')")
    bindir = Path(found[-1]).parent
    if os.geteuid() == 0:
        try:
            pg_user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root without a 'postgres' user to run the server")
        if shutil.which("runuser") is None:
            pytest.skip("runuser is not available")
    base = Path(tempfile.mkdtemp(prefix="svc-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        for p in (base, sock):
            os.chown(p, pg_user.pw_uid, pg_user.pw_gid)
    port = _free_port()
    try:
        _as_postgres(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
            timeout=120,
        )
        _as_postgres(
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(base / "server.log"),
                "-w",
                "-t",
                "60",
                "-o",
                f"-k {sock} -p {port} -h 127.0.0.1 -c fsync=off",
                "start",
            ],
            timeout=90,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log = (base / "server.log").read_text() if (base / "server.log").exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"cannot start a throwaway PostgreSQL: {exc}\n{log[-2000:]}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            (["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else [])
            + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh database; its SQLAlchemy URL (driver psycopg 3)."""
    name = f"ingestd_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = pg_server.rpartition("/")
    yield f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        return list(conn.execute(sql).fetchall())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return copy_tree(tmp_path / "docs", PAGES)


def test_sync_edit_rename_delete_on_postgres(
    tree: Path, tmp_path: Path, pg_url: str, fake_embedder: CountingEmbedder
) -> None:
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder, manifest={"url": pg_url})
    (name,) = eng.context.sources
    try:
        res = eng.sync(name)
        assert res.indexed == len(PAGES)
        assert not (state / "manifest.db").exists(), "the manifest must live in PostgreSQL"
        docs = _rows(pg_url, "SELECT count(*) FROM documents")
        assert docs == [(len(PAGES),)]
        n = len(fake_embedder.texts)
        page = tree / PAGES[0]
        page.write_text(page.read_text() + "\n\nA paragraph added later.\n")
        (tree / PAGES[1]).rename(tree / "blog/renamed.md")
        (tree / PAGES[2]).unlink()
        res = eng.sync(name)
        assert res.indexed == 2 and res.deleted == 2
        assert all("added later" in t for t in fake_embedder.texts[n:])
        assert eng.sync(name).chunks_written == 0  # a no-op
        assert eng.verify(name).clean
    finally:
        eng.close()
    # a restarted engine finds its state in PostgreSQL: nothing to do
    eng = make_engine(tree, state, fake_embedder, manifest={"url": pg_url})
    try:
        plan = eng.plan(name)
        assert plan.empty and plan.unchanged == len(PAGES) - 1
        assert eng.verify(name).clean
    finally:
        eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)


def test_interrupted_write_is_finished_on_postgres(
    tree: Path, tmp_path: Path, pg_url: str, fake_embedder: CountingEmbedder
) -> None:
    """Pending ids recorded before the upsert survive in PostgreSQL; the next sync ends clean."""
    state = tmp_path / "state"
    eng = make_engine(tree, state, fake_embedder, manifest={"url": pg_url})
    (name,) = eng.context.sources

    class Crash(BaseException):
        """The process dies (a store error would only fail the documents, see writer)."""

    def boom(*a: Any, **kw: Any) -> None:
        raise Crash("crash after the pending ids were recorded")

    real_upsert = eng.resources.store.upsert
    eng.resources.store.upsert = boom
    try:
        with pytest.raises(Crash):
            eng.sync(name)
        assert _rows(pg_url, "SELECT count(*) FROM chunks WHERE pending")[0][0] > 0
        eng.resources.store.upsert = real_upsert
        eng.sync(name)
        assert _rows(pg_url, "SELECT count(*) FROM chunks WHERE pending") == [(0,)]
        assert eng.verify(name).clean
    finally:
        eng.close()
    assert_matches_oracle(tree, state, tmp_path, fake_vectors)
