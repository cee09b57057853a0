"""Soak: does ``ingestd run`` stay flat in memory while files are rewritten for ever?

Starts a real ``ingestd run`` (the real model, embedded Qdrant, real watches) on a tree
of a few 12,000-character markdown files, then runs edit cycles: each cycle rewrites
one file (round robin) with a share of its paragraphs new, each new paragraph holding
words never seen before (ids, numbers: the worst case for per-process word tables),
and waits until the daemon has applied that edit (the manifest holds the file's new
content hash). Cycles start at most once per ``--period`` seconds.

Prints the daemon's RSS (``VmRSS`` from ``/proc/PID/status``, read once the daemon is
idle: no CPU time used for 0.2 s) after the initial ingest,
after ``--warmup`` cycles, every 100 cycles, and at the end, then the growth from the
warm-up reading to the end; exits 1 when it is over ``--max-growth-mb`` (30 MB). It is
a bench, not a test: run it when the machine is quiet enough, e.g.

    python bench/soak.py                     # 1,000 cycles after 100 of warm-up
    python bench/soak.py --cycles 200 --warmup 50 --keep /tmp/soak   # a quick look
    python bench/soak.py --files 50 --share 1 --minutes 60 --warmup-minutes 10

The last is the hour of rewrites of docs/benchmarks.md: 50 files of 12,000 characters, every
paragraph of one rewritten each second (all its chunks new, so every rewrite deletes
and writes about 30 points), RSS printed every minute, growth measured from the
10th minute.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
VOCAB_FILE = HERE.parent.parent / "shared/corpora/md-docs/docs/concepts/glossary.md"


def rss_mb(pid: int) -> float:
    """Resident set size of process ``pid``, in MB (MiB)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Writer:
    """Makes the edited files: paragraphs of corpus words, some with fresh tokens."""

    def __init__(self, n_files: int, chars: int, share: float, seed: int) -> None:
        self.rng = random.Random(seed)
        words = VOCAB_FILE.read_text(encoding="utf-8").split() if VOCAB_FILE.exists() else []
        self.words = [w for w in words if w.isalpha()] or ["telemetry", "collector", "span"]
        self.chars = chars
        self.share = share
        self.serial = 0
        self.docs = [self._doc(i) for i in range(n_files)]

    def _paragraph(self) -> str:
        self.serial += 1
        words = [self.rng.choice(self.words) for _ in range(self.rng.randint(40, 90))]
        # fresh tokens: an id and a number nobody wrote before
        words.insert(self.rng.randrange(len(words)), f"req-{self.rng.getrandbits(40):010x}")
        words.insert(self.rng.randrange(len(words)), str(self.serial * 7919))
        return " ".join(words).capitalize() + "."

    def _doc(self, i: int) -> list[str]:
        paras: list[str] = [f"# Soak document {i}"]
        n = 0
        while n < self.chars:
            p = f"## Part {len(paras)}" if len(paras) % 5 == 0 else self._paragraph()
            paras.append(p)
            n += len(p) + 2
        return paras

    def rewrite(self, i: int) -> bytes:
        paras = self.docs[i]
        for k in range(1, len(paras)):
            if not paras[k].startswith("#") and self.rng.random() < self.share:
                paras[k] = self._paragraph()
        return ("\n\n".join(paras) + "\n").encode()


def cpu_ticks(pid: int) -> int:
    """User + system CPU time of process ``pid`` (all its threads), in clock ticks."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat


def idle_rss_mb(pid: int, timeout: float = 30.0) -> float:
    """:func:`rss_mb` once the process is idle: no CPU time used over 0.2 s.

    An edit counts as applied when the manifest holds it, before the sync has ended
    and given its free memory back; a reading then would catch the embedding batch's
    memory. Past ``timeout`` seconds the reading is taken anyway.
    """
    deadline = time.monotonic() + timeout
    before = cpu_ticks(pid)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = cpu_ticks(pid)
        if now - before <= 1:  # a tick: the watchdog ping, a status tick
            break
        before = now
    return rss_mb(pid)


def content_hash_of(db: Path, rel: str) -> str | None:
    """The content hash the manifest records for ``rel`` (read-only, WAL allows it)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            q = "SELECT content_hash FROM documents WHERE path = ?"
            row = con.execute(q, (rel,)).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def wait_applied(
    db: Path, rel: str, digest: str, proc: subprocess.Popen[bytes], timeout: float
) -> float:
    """Seconds until the manifest holds ``digest`` for ``rel``."""
    t0 = time.monotonic()
    while content_hash_of(db, rel) != digest:
        if proc.poll() is not None:
            raise SystemExit(f"ingestd run exited with {proc.returncode}")
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"{rel} was not applied within {timeout:.0f} s")
        time.sleep(0.02)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=1000, help="edit cycles after the warm-up")
    ap.add_argument("--warmup", type=int, default=100, help="edit cycles before the baseline")
    ap.add_argument("--files", type=int, default=3)
    ap.add_argument("--chars", type=int, default=12_000, help="size of each file, in characters")
    ap.add_argument("--share", type=float, default=0.25, help="share of paragraphs rewritten")
    ap.add_argument("--period", type=float, default=1.0, help="least seconds between cycles")
    ap.add_argument("--max-growth-mb", type=float, default=30.0)
    ap.add_argument("--keep", type=Path, help="work folder to keep (default: a removed temp one)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=float, help="run for this long instead of --cycles")
    ap.add_argument(
        "--warmup-minutes", type=float, default=10.0, help="with --minutes: baseline after this"
    )
    args = ap.parse_args()

    from _provenance import provenance

    work = args.keep or Path(tempfile.mkdtemp(prefix="ingestd-soak-"))
    root, state = work / "docs", work / "state"
    shutil.rmtree(work, ignore_errors=True)
    root.mkdir(parents=True)
    writer = Writer(args.files, args.chars, args.share, args.seed)
    for i in range(args.files):
        (root / f"doc{i}.md").write_bytes(writer.rewrite(i))
    exe = Path(sys.executable).parent / "ingestd"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "ingestd.daemon"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = open(work / "ingestd.log", "wb")  # open for the daemon's lifetime
    proc = subprocess.Popen(
        [*cmd, "run", "--state-dir", str(state), str(root)], stdout=log, stderr=log, env=env
    )
    db = state / "manifest.db"
    print(provenance())
    print(f"ingestd run pid {proc.pid}; work folder {work}")
    try:
        for i in range(args.files):
            data = (root / f"doc{i}.md").read_bytes()
            wait_applied(db, f"doc{i}.md", hashlib.sha256(data).hexdigest(), proc, 600)
        print(f"initial ingest done: rss {idle_rss_mb(proc.pid):.1f} MB")
        latencies: list[float] = []
        baseline = 0.0
        started = time.monotonic()
        total = args.warmup + args.cycles
        if args.minutes is not None:
            total = 10**9  # until the time is up
            next_minute = 1
        c = 0
        while c < total:
            c += 1
            t0 = time.monotonic()
            if args.minutes is not None:
                elapsed = (t0 - started) / 60
                if elapsed >= args.minutes:
                    break
                if elapsed >= next_minute:
                    rss = idle_rss_mb(proc.pid)
                    if not baseline and elapsed >= args.warmup_minutes:
                        baseline = rss
                        print(f"baseline after {elapsed:.1f} min ({c} cycles): rss {rss:.1f} MB")
                    print(
                        f"minute {next_minute}: rss {rss:.1f} MB after {c} cycles, apply latency "
                        f"median {statistics.median(latencies[-60:] or [0]):.2f} s",
                        flush=True,
                    )
                    next_minute += 1
            i = c % args.files
            data = writer.rewrite(i)
            (root / f"doc{i}.md").write_bytes(data)
            latencies.append(
                wait_applied(db, f"doc{i}.md", hashlib.sha256(data).hexdigest(), proc, 600)
            )
            if args.minutes is None and c == args.warmup:
                baseline = idle_rss_mb(proc.pid)
                print(f"after {c} warm-up cycles: rss {baseline:.1f} MB")
            elif args.minutes is None and c > args.warmup and (c - args.warmup) % 100 == 0:
                print(
                    f"cycle {c - args.warmup}: rss {idle_rss_mb(proc.pid):.1f} MB, "
                    f"apply latency median {statistics.median(latencies[-100:]):.2f} s",
                    flush=True,
                )
            time.sleep(max(0.0, args.period - (time.monotonic() - t0)))
        end = idle_rss_mb(proc.pid)
        growth = end - baseline
        minutes = (time.monotonic() - started) / 60
        print(
            f"end after {c} cycles ({minutes:.1f} min): rss {end:.1f} MB; "
            f"growth {growth:+.1f} MB (limit {args.max_growth_mb:.0f} MB): "
            f"{'PASS' if growth <= args.max_growth_mb else 'FAIL'}"
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if growth <= args.max_growth_mb else 1)


if __name__ == "__main__":
    main()
