"""What the operator's commands cost as the index grows: 100k and 1M points on Qdrant Edge.

Each command's cost should follow the change, not the index. Per size, in one run, as
ratios against a baseline measured in the same rounds, every size in each round (the
machines are shared: a burst of load then weighs on each size alike):

* a no-op ``ingestd resync`` of md-docs (768 files, nothing changed) in a collection
  that holds 100k or 1M points (target: <= 1.5 s at 100k, and at most 1.2x that at 1M),
  beside the same resync of md-docs alone (~7.8k points): what an index costs beyond
  the files;
* ``ingestd status`` without a daemon, beside ``python -c pass`` (target: <= +0.3 s);
* the daemon's start to ready (``READY=1``) and to its first reconcile's end, after a
  clean stop (target: <= 5 s to ready at 1M) and after a ``kill -9`` (reported: the
  store is then checked point by point);
* the daemon's RSS, idle, after its first reconcile.

The state dirs: md-docs indexed with synthetic vectors (a no-op costs no embedding, and
the configured model's profile is recorded as a real ingest records it), plus a source
``bulk`` of synthetic points in the same collection (20 points per document, payloads
as ingestd writes them), recorded in the manifest as committed documents, so that the
store holds as many points as the manifest records. Building one takes long (about 25
minutes for 1M points on 2 busy cores): it is built once, outside the repository
(``--work``, default ``$TMPDIR/ingestd-bench-state``), and reused.

Usage::

    python bench/state_cost.py --build 0,100000,1000000   # once (0: md-docs alone)
    python bench/state_cost.py [--sizes 0,100000,1000000] [--runs 5] [--commands-only]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "corpora" / "md-docs"
DEFAULT_WORK = Path(tempfile.gettempdir()) / "ingestd-bench-state"
COLLECTION = "ingestd"
BULK = "bulk"
PER_DOC = 20
DIM = 384
BATCH = 256


def synthetic_vectors(texts: Any, dim: int = DIM) -> Any:
    """Unit vectors seeded by each text's hash (no model: a no-op embeds nothing)."""
    out = np.empty((len(texts), dim), dtype=np.float32)
    for i, t in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
        out[i] = v / np.linalg.norm(v)
    return out


def ingestd() -> list[str]:
    exe = Path(sys.executable).parent / "ingestd"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ingestd.daemon"]


# -- building a state dir --------------------------------------------------------------------


def _bulk_points(doc: int, rng: np.random.Generator) -> tuple[str, list[Any], list[Any]]:
    """Document ``doc`` of the bulk source: its path, points and chunk rows."""
    from ingestd.store.manifest.documents import ChunkRow
    from ingestd.store.search.query import path_prefixes
    from ingestd.store.search.sparse import SparseVec
    from ingestd.store.vectors.base import Point

    path = f"area{doc % 50}/part{doc % 7}/page{doc}.md"
    doc_hash = hashlib.sha256(f"bulk doc {doc}".encode()).hexdigest()
    vecs = rng.standard_normal((PER_DOC, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    points, rows = [], []
    for j in range(PER_DOC):
        chunk_hash = hashlib.sha256(f"bulk chunk {doc} {j}".encode()).hexdigest()
        pid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"bulk/{path}/{chunk_hash}/0"))
        terms = sorted({int(t) for t in rng.integers(0, 100_000, 40)})
        payload = {
            "source": BULK,
            "path": path,
            "path_prefixes": path_prefixes(path),
            "doc_hash": doc_hash,
            "chunk_hash": chunk_hash,
            "ordinal": j,
            "start_char": j * 600,
            "end_char": (j + 1) * 600,
            "start_line": j * 12 + 1,
            "end_line": (j + 1) * 12,
            "n_tokens": 150,
            "chunker": "markdown",
            "rule": "default",
            "rule_fingerprint": "bulk",
            "heading_path": ["Bulk", f"Page {doc}"],
            "text": f"bulk page {doc} chunk {j} " * 25,
            "indexed_at": 0.0,
        }
        sparse = SparseVec(terms, [1.0] * len(terms))
        points.append(Point(pid, vecs[j], payload, sparse))
        rows.append(ChunkRow(pid, chunk_hash, j, j * 600, (j + 1) * 600))
    return path, points, rows


def build(state: Path, total: int) -> None:
    """Build a state dir of ``total`` points: md-docs plus the bulk source (see the docstring)."""
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine
    from ingestd.store.manifest.documents import AdoptedDocument
    from ingestd.store.manifest.manifest import Manifest, sqlite_url
    from ingestd.store.vectors.edge.edge import EdgeStore

    work = state.with_name(state.name + ".building")
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.monotonic()
    cfg = load_config(None, roots=[CORPUS])
    eng = Engine(cfg, work, embed_model=synthetic_vectors)
    try:
        res = eng.sync(next(iter(eng.context.sources)))
        docs_points = eng.resources.manifest.collection_counts(COLLECTION)[0]
    finally:
        eng.close()
    print(f"md-docs: {res.indexed} documents, {docs_points:,} points", flush=True)
    manifest = Manifest(sqlite_url(work / "manifest.db"))
    store = EdgeStore(work / "edge", engine="edge")
    try:
        manifest.ensure_source(BULK, "/nonexistent/bulk", COLLECTION)
        rng = np.random.default_rng(42)
        n_docs = max(0, total - docs_points) // PER_DOC
        for first in range(0, n_docs, 500):
            docs: dict[str, AdoptedDocument] = {}
            batch: list[Any] = []
            for doc in range(first, min(n_docs, first + 500)):
                path, points, rows = _bulk_points(doc, rng)
                batch.extend(points)
                docs[path] = AdoptedDocument(points[0].payload["doc_hash"], "bulk", tuple(rows))
            for i in range(0, len(batch), BATCH):
                store.upsert(COLLECTION, batch[i : i + BATCH])
            manifest.adopt(BULK, docs)
            if first % 10_000 == 0:
                done = (first + len(docs)) * PER_DOC
                print(f"  bulk: {done:,} points, {time.monotonic() - t0:.0f} s", flush=True)
    finally:
        store.close()
        manifest.close()
    shutil.rmtree(state, ignore_errors=True)
    os.replace(work, state)
    from ingestd.daemon.sync.state.ownership import claim_store

    claim_store(state / "edge", state)  # it was built under another name
    print(f"built {state} in {time.monotonic() - t0:.0f} s", flush=True)


# -- measuring --------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    for key in ("INGESTD_STATE_DIR", "INGESTD_CONFIG", "INGESTD_SOCKET", "PYTHONDONTWRITEBYTECODE"):
        env.pop(key, None)
    return env


def _timed(
    cmd: list[str], env: dict[str, str]
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall seconds, CPU seconds (user + system) and the result of one process."""
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), proc


def _rss_mb(pid: int) -> dict[str, float]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024
    return out


def daemon_start(
    state: Path, env: dict[str, str], *, kill: bool = False, idle_s: float = 0.0
) -> dict[str, Any]:
    """Start ``ingestd run``: seconds to ``READY=1`` and to its first reconcile's end.

    ``READY=1`` is read from a notify socket of this process, as systemd reads it.
    With ``kill`` the daemon ends with SIGKILL, else SIGTERM (a clean stop); with
    ``idle_s`` its RSS is read after that many idle seconds.
    """
    sock_dir = Path(tempfile.mkdtemp(prefix="bench-notify-"))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(sock_dir / "notify"))
    notify.settimeout(0.2)
    log = (sock_dir / "daemon.log").open("wb")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*ingestd(), "run", "--state-dir", str(state), str(CORPUS)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**env, "NOTIFY_SOCKET": str(sock_dir / "notify")},
    )
    out: dict[str, Any] = {}
    try:
        while "ready_s" not in out or "watching_s" not in out:
            if proc.poll() is not None:
                sys.exit(f"the daemon exited:\n{(sock_dir / 'daemon.log').read_text()[-3000:]}")
            try:
                msg = notify.recv(4096).decode()
            except TimeoutError:
                continue
            now = time.perf_counter() - t0
            if "READY=1" in msg and "ready_s" not in out:
                out["ready_s"] = now
            if "ready_s" in out and "STATUS=watching" in msg:
                out["watching_s"] = now
            if time.perf_counter() - t0 > 3600:
                sys.exit("the daemon did not finish its first reconcile in an hour")
        if idle_s:
            time.sleep(idle_s)  # a bench measures an idle process: nothing to poll for
            out["rss_mb"] = _rss_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        proc.wait(300)
        log.close()
        notify.close()
        shutil.rmtree(sock_dir, ignore_errors=True)
    return out


def measure(
    states: list[Path], runs: int, env: dict[str, str], daemon: bool = True
) -> list[dict[str, Any]]:
    """The figures of each state dir (see the module docstring).

    The commands of every size run in the same rounds, one size after another, so that
    the machine's load weighs on each size alike and the ratios between sizes hold.
    ``daemon``: measure the daemon's start and RSS too (``False``: the commands only).
    """
    base = [sys.executable, "-c", "pass"]
    commands = {
        state: {
            "base": base,
            "status": [*ingestd(), "status", "--state-dir", str(state)],
            "resync": [*ingestd(), "resync", "--state-dir", str(state), str(CORPUS)],
        }
        for state in states
    }
    times: dict[Path, dict[str, list[tuple[float, float]]]] = {
        state: {name: [] for name in cmds} for state, cmds in commands.items()
    }
    for state in states:  # a clean stop first: whatever ended the state before
        daemon_start(state, env)
    for rnd in range(runs + 1):  # round 0 warms the page cache and the bytecode
        for state, cmds in commands.items():
            for name, cmd in cmds.items():
                wall, cpu, proc = _timed(cmd, env)
                if proc.returncode != 0:
                    sys.exit(f"{name} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
                if name == "resync" and " 0 indexed" not in proc.stdout:
                    sys.exit(f"the resync was not a no-op:\n{proc.stdout[-2000:]}")
                if rnd:
                    times[state][name].append((wall, cpu))
    rows = []
    for state in states:
        clean: dict[str, Any] = {}
        killed: dict[str, Any] = {}
        if daemon:
            clean = daemon_start(state, env, idle_s=20.0)
            daemon_start(state, env, kill=True)
            killed = daemon_start(state, env)
        out: dict[str, Any] = {"points": _points(state), "clean": clean, "killed": killed}
        for name, ts in times[state].items():
            out[f"{name}_s"] = statistics.median(w for w, _ in ts)
            out[f"{name}_cpu_s"] = statistics.median(c for _, c in ts)
        print(json.dumps(out), file=sys.stderr, flush=True)
        rows.append(out)
    return rows


def _points(state: Path) -> int:
    import sqlite3

    # immutable: a read-only connection would create the -wal and -shm files, and a
    # manifest file changed since the clean close is checked point by point next time
    conn = sqlite3.connect(f"file:{state / 'manifest.db'}?mode=ro&immutable=1", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM chunks WHERE NOT pending").fetchone()[0])
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.epilog = __doc__.split("\n\n", 1)[1]
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help="where the state dirs live")
    ap.add_argument("--build", help="build the state dirs of these sizes (comma-separated)")
    ap.add_argument("--sizes", default="0,100000,1000000", help="0: md-docs alone (~7.8k)")
    ap.add_argument("--runs", type=int, default=5, help="processes per command (median)")
    ap.add_argument(
        "--commands-only",
        action="store_true",
        help="measure status and the no-op resync only, not the daemon's start and RSS",
    )
    args = ap.parse_args()
    if args.build:
        for n in (int(s) for s in args.build.split(",")):
            build(args.work / f"state-{n}", n)
        return
    from _provenance import provenance

    env = _env()
    states = [args.work / f"state-{n}" for n in (int(s) for s in args.sizes.split(","))]
    for state in states:
        if not (state / "manifest.db").exists():
            sys.exit(f"no state dir {state.name}: run with --build {state.name[6:]} first")
    rows = measure(states, args.runs, env, daemon=not args.commands_only)
    print(provenance())
    _table(rows)


def _table(rows: list[dict[str, Any]]) -> None:
    print(
        f"medians; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
        "CPU = user + system seconds of the process (what it costs on idle cores)"
    )
    head = (
        "points | python -c pass s | status s (- base) | status CPU s (- base) | "
        "no-op resync s | no-op resync CPU s | ready after stop s | watching after stop s | "
        "ready after kill -9 s | watching after kill -9 s | idle RSS MB (anon / file)"
    )
    print("| " + head + " |")
    print("|" + " --- |" * (head.count("|") + 1))
    for r in rows:
        c, k, rss = r["clean"], r["killed"], r["clean"].get("rss_mb", {})
        cells = [
            f"{r['points']:,}",
            f"{r['base_s']:.3f}",
            f"{r['status_s']:.3f} ({r['status_s'] - r['base_s']:+.3f})",
            f"{r['status_cpu_s']:.3f} ({r['status_cpu_s'] - r['base_cpu_s']:+.3f})",
            f"{r['resync_s']:.2f}",
            f"{r['resync_cpu_s']:.2f}",
            *(
                f"{d[key]:.2f}" if key in d else "-"
                for d in (c, k)
                for key in ("ready_s", "watching_s")
            ),
            f"{rss.get('VmRSS', 0):.0f} "
            f"({rss.get('RssAnon', 0):.0f} / {rss.get('RssFile', 0):.0f})",
        ]
        print("| " + " | ".join(cells) + " |")
    for small, big in zip(rows, rows[1:], strict=False):
        print(
            f"no-op resync {big['points']:,} / {small['points']:,} points: "
            f"{big['resync_s'] / small['resync_s']:.2f}x (target <= 1.2x from 100k to 1M); "
            f"status - base at {big['points']:,}: {big['status_s'] - big['base_s']:+.3f} s "
            "(target <= +0.3 s)"
        )


if __name__ == "__main__":
    main()
