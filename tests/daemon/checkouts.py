"""Checkouts shaped like real documentation repositories, and a real ``ingestd run`` on them.

:func:`make_checkout` writes a few ordinary documentation folders beside a gitignored
``node_modules/`` and ``.venv/`` of any size (tens of thousands of folders, as a
Docusaurus site or a virtualenv has), fast: ``os.mkdir`` loops and tiny files.
:class:`Daemon` runs ``ingestd run`` on it as its own process and reads what only the
kernel knows about it: its inotify watches (``inotify wd:`` lines of
``/proc/PID/fdinfo/*``), CPU seconds and resident memory. Shared by
``test_real_checkouts.py`` and ``bench/watch.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.helpers import ingestd_cmd, run_cli, wait_for

#: The folders that hold the documents (with their parents and the root: 14 folders).
DOC_FOLDERS = tuple(f"docs/{top}/{sub}" for top in ("guide", "api", "howto", "ref") for sub in "ab")
TOPICS = ("install", "configure", "deploy", "monitor", "upgrade", "migrate", "secure", "tune")


@dataclass(frozen=True)
class Checkout:
    """What :func:`make_checkout` made.

    Attributes:
        root: the checkout.
        docs: the documents (relative paths).
        doc_folders: folders that can hold documents (the root included).
        heavy_folders: folders made below ``node_modules/`` and ``.venv/``.
        heavy_files: files made in them.
    """

    root: Path
    docs: tuple[str, ...]
    doc_folders: int
    heavy_folders: int
    heavy_files: int


def _doc(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return (
        f"# How to {topic} part {i}\n\n"
        f"This page explains how to {topic} the service, step {i} of the guide.\n\n"
        f"## Details\n\nRun the {topic} command and check the log for errors.\n"
    )


def make_checkout(dest: Path, heavy_folders: int, files_per_folder: int = 5) -> Checkout:
    """Write a checkout at ``dest``: 50 documents, and ``heavy_folders`` ignored folders.

    The heavy folders are split between ``node_modules/`` (packages of ``lib/``,
    ``lib/sub/``, ``dist/``) and ``.venv/lib/python3.11/site-packages/``, each folder
    holding ``files_per_folder`` files of 16 bytes; ``.gitignore`` names both. A small
    ``.git/`` and a ``src/__pycache__/`` sit beside them.
    """
    dest.mkdir(parents=True)
    (dest / ".gitignore").write_text("node_modules/\n.venv/\n__pycache__/\n")
    (dest / "README.md").write_text(_doc(0))
    docs = ["README.md"]
    for folder in DOC_FOLDERS:
        (dest / folder).mkdir(parents=True)
    for i in range(1, 50):
        rel = f"{DOC_FOLDERS[i % len(DOC_FOLDERS)]}/doc{i:02d}.md"
        (dest / rel).write_text(_doc(i))
        docs.append(rel)
    for sub in (".git/objects/00", ".git/refs/heads", "src/__pycache__"):
        (dest / sub).mkdir(parents=True)
    payload = b"module.exports={}"[:16]
    made = files = 0
    halves = {
        dest / "node_modules": heavy_folders // 2,
        dest / ".venv/lib/python3.11/site-packages": heavy_folders - heavy_folders // 2,
    }
    for base, n in halves.items():
        if n <= 0:
            continue
        base.mkdir(parents=True)
        pkg = done = 0
        while done < n:
            top = base / f"pkg{pkg:05d}"
            pkg += 1
            for folder in (top, top / "lib", top / "lib/sub", top / "dist")[: n - done]:
                os.mkdir(folder)
                done += 1
                for k in range(files_per_folder):
                    with open(folder / f"f{k}.js", "wb") as f:
                        f.write(payload)
                    files += 1
        made += done
    # the root, docs/, its 4 + 8 folders, src/ (its __pycache__/ and .git/ are ignored)
    return Checkout(dest, tuple(docs), 1 + 1 + 4 + len(DOC_FOLDERS) + 1, made, files)


def inotify_watches(pid: int) -> int:
    """Inotify watches held by process ``pid`` (``inotify wd:`` lines of its fdinfo)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as f:
                n += sum(1 for line in f if line.startswith(b"inotify wd:"))
        except OSError:
            continue
    return n


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (``/proc/PID/stat`` fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (``VmRSS`` of ``/proc/PID/status``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Daemon:
    """``ingestd run`` of one checkout in its own process, its output in ``log``.

    Args:
        args: arguments after ``ingestd run`` (``--state-dir`` is added).
        state: the state dir.
        log: where stdout and stderr go.
        cwd: the working directory.
        env: extra environment.
    """

    def __init__(
        self,
        args: list[str],
        state: Path | None,
        log: Path,
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.state = state
        self.log = log
        self.env = {**os.environ, "INGESTD_STATE_DIR": "", **(env or {})}
        self._out: IO[bytes] = log.open("wb")
        extra = ["--state-dir", str(state)] if state is not None else []
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [*ingestd_cmd(), "run", *extra, *args],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=self.env,
        )

    @property
    def pid(self) -> int:
        """The daemon's process id."""
        return self.proc.pid

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ``ingestd ARGS`` against this daemon's state dir."""
        extra = ["--state-dir", str(self.state)] if self.state is not None else []
        env = {k: v for k, v in self.env.items() if k in ("XDG_STATE_HOME", "INGESTD_STATE_DIR")}
        return run_cli(*args, *extra, timeout=timeout, env=env)

    def status(self) -> dict[str, Any]:
        """``ingestd status --json`` (``{}`` when it does not answer yet)."""
        p = self.cli("status", "--json")
        try:
            out: dict[str, Any] = json.loads(p.stdout) if p.stdout.strip() else {}
        except json.JSONDecodeError:
            return {}
        return out

    def daemon_status(self) -> dict[str, Any]:
        """The ``daemon`` part of :meth:`status` (``{}`` until the daemon answers)."""
        return self.status().get("daemon") or {}

    def search(self, query: str, k: int = 5) -> list[dict[str, Any]]:
        """``ingestd search --json`` hits."""
        p = self.cli("search", "--json", "-k", str(k), query)
        assert p.returncode == 0, p.stderr
        hits: list[dict[str, Any]] = json.loads(p.stdout)
        return hits

    def wait_reconciled(self, timeout: float = 300) -> float:
        """Wait for the end of the first reconcile; returns seconds since the start."""

        def watching() -> bool:
            assert self.proc.poll() is None, f"ingestd exited:\n{self.log.read_text()[-3000:]}"
            return self.daemon_status().get("phase") == "watching"

        wait_for(watching, timeout, "the first reconcile", interval=0.2)
        return time.monotonic() - self.started

    def log_text(self) -> str:
        """What the daemon logged so far."""
        if not self._out.closed:
            self._out.flush()
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM, then wait (kill after 30 s); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        return self.proc.returncode
