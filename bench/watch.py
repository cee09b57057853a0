"""Watching a checkout with a huge ignored subtree costs what watching its documents costs.

For each size (folders below a gitignored ``node_modules/`` and ``.venv/``, 5 files of
16 bytes each, beside 50 markdown documents in 15 ordinary folders), and for the same
documents without the heavy subtree, in one run and interleaved (docs only, then
heavy, per size), a real ``ingestd run`` (fresh state dir) is timed. The model's cost
is the same in both and is left out: a warm-up run embeds the documents once, every
measured run starts with a copy of its embedding cache (nothing is embedded: the
vectors are reused) and ``embedding.preload: false`` (the model is never loaded).

* seconds from the start of ``ingestd run`` to the end of its first reconcile
  (``status`` phase ``watching``, polled every 0.2 s: that is the resolution);
* inotify watches it holds (``inotify wd:`` lines of ``/proc/PID/fdinfo/*``);
* resident memory (``VmRSS``) at the end of the idle window;
* CPU seconds (user + system) over ``--idle`` seconds of idling after the first
  reconcile, and queue overflows counted by ``status`` over the whole run.

Trees are made on tmpfs (``/dev/shm``) when there is one. The machine is shared and
noisy: compare each heavy row with its docs-only row. ``--view DIR`` runs another
version of ingestd: DIR holds an ``ingestd/`` package view (folders ``daemon``,
``chunkers``, ``store``, as docs/development.md builds for mypy).

    python bench/watch.py                            # 1k, 10k, 50k folders, 60 s idle
    python bench/watch.py --sizes 10000 --idle 20    # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.daemon.checkouts import (  # noqa: E402
    Daemon,
    cpu_seconds,
    inotify_watches,
    make_checkout,
    rss_mb,
)


def config(root: Path, scratch: Path) -> Path:
    """A config watching ``root`` that never preloads the model."""
    path = scratch / f"config-{time.monotonic_ns()}.yaml"
    path.write_text(
        json.dumps(
            {"sources": [{"name": "site", "root": str(root)}], "embedding": {"preload": False}}
        )
    )
    return path


def seeded_state(scratch: Path, cache: Path | None) -> Path:
    """A fresh private state dir holding a copy of the embedding cache ``cache``."""
    state = scratch / f"state-{time.monotonic_ns()}"
    state.mkdir(mode=0o700)
    if cache is not None:
        for f in cache.parent.glob(cache.name + "*"):  # the database and its WAL files
            shutil.copy2(f, state / f.name)
            (state / f.name).chmod(0o600)
    return state


def measure(
    root: Path,
    scratch: Path,
    idle: float,
    env: dict[str, str],
    *,
    cache: Path | None,
    settle: float = 600,
) -> dict[str, Any]:
    """One ``ingestd run`` on ``root``: reconcile time, watches, idle RSS and CPU.

    A daemon that does not finish its first reconcile within ``settle`` seconds is
    measured all the same (its reconcile time is ``> settle``).
    """
    state = seeded_state(scratch, cache)
    log = scratch / f"daemon-{time.monotonic_ns()}.log"
    daemon = Daemon(["--config", str(config(root, scratch))], state, log, env=env)
    try:
        reconcile: float | None
        try:
            reconcile = round(daemon.wait_reconciled(timeout=settle), 1)
        except AssertionError:
            reconcile = None
        watches = inotify_watches(daemon.pid)
        cpu0, t0 = cpu_seconds(daemon.pid), time.monotonic()
        while time.monotonic() - t0 < idle:
            time.sleep(min(1.0, max(0.0, idle - (time.monotonic() - t0))))
        cpu = cpu_seconds(daemon.pid) - cpu0
        rss = rss_mb(daemon.pid)
        d = daemon.daemon_status()
        embedded = daemon.status().get("embedded_since_start")
        overflows = d.get("overflows")
        if overflows is None:  # a version without the counter: count the log's warnings
            overflows = daemon.log_text().count("overflow")
    finally:
        daemon.stop()
    if cache is None:  # the warm-up: its cache seeds the measured runs
        return {"state": state}
    shutil.rmtree(state, ignore_errors=True)
    return {
        "embedded": embedded,
        "reconcile_s": reconcile if reconcile is not None else f"> {settle:.0f}",
        "watches": watches,
        "rss_mb": round(rss, 1),
        "idle_cpu_s": round(cpu, 2),
        "overflows": overflows,
    }


def _median(rows: list[dict[str, Any]], key: str) -> Any:
    values = [r[key] for r in rows]
    if all(isinstance(v, int | float) for v in values):
        m = statistics.median(values)
        return int(m) if m == int(m) and all(isinstance(v, int) for v in values) else round(m, 2)
    return "/".join(str(v) for v in values)  # a run that did not settle


def _spread(rows: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in rows if isinstance(r[key], int | float)]
    return f" ({min(values)}-{max(values)})" if len(values) > 1 else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,50000", help="heavy folders per tree")
    ap.add_argument("--idle", type=float, default=60.0, help="idle window, seconds")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each tree (medians shown)")
    ap.add_argument("--view", type=Path, help="a folder holding another ingestd/ package view")
    ap.add_argument("--settle", type=float, default=600.0, help="longest wait, seconds")
    ap.add_argument("--json", action="store_true", help="print each run as a JSON line too")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    env = {"PYTHONPATH": str(args.view.resolve())} if args.view else {}
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    scratch = Path(tempfile.mkdtemp(prefix="bench-watch-", dir=base))
    groups: dict[str, list[dict[str, Any]]] = {}
    try:
        docs = make_checkout(scratch / "docs-only", 0)
        print(f"warm-up run (embeds the documents once) on {docs.root}", flush=True)
        warm = measure(docs.root, scratch, 0, env, cache=None)["state"]
        cache = warm / "embeddings.db"
        for n in sizes:
            t = time.monotonic()
            heavy = make_checkout(scratch / f"heavy-{n}", n)
            print(f"tree of {n:,} folders made in {time.monotonic() - t:.1f} s", flush=True)
            for rep in range(args.repeat):
                for label, co in ((f"docs only (pair of {n:,})", docs), (f"{n:,} folders", heavy)):
                    print(f"measuring {label}, run {rep + 1} ...", flush=True)
                    r = measure(co.root, scratch, args.idle, env, cache=cache, settle=args.settle)
                    r.update(tree=label, heavy_folders=co.heavy_folders, heavy_files=co.heavy_files)
                    groups.setdefault(label, []).append(r)
                    if args.json:
                        print(json.dumps(r), flush=True)
            shutil.rmtree(heavy.root, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\nmedians of {args.repeat} run(s) (range)\n")
    print(
        f"| tree | folders / files ignored | first reconcile s | watches | RSS MB | "
        f"CPU s over {args.idle:.0f} s idle | overflows | chunks embedded |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, rows in groups.items():
        r = rows[0]
        print(
            f"| {label} | {r['heavy_folders']:,} / {r['heavy_files']:,} "
            f"| {_median(rows, 'reconcile_s')}{_spread(rows, 'reconcile_s')} "
            f"| {_median(rows, 'watches')} | {_median(rows, 'rss_mb')} "
            f"| {_median(rows, 'idle_cpu_s')}{_spread(rows, 'idle_cpu_s')} "
            f"| {sum(x['overflows'] for x in rows)} | {sum(x['embedded'] or 0 for x in rows)} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
