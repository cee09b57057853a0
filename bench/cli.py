"""Whole-process times of the operator's commands beside ``python -c pass``.

Every figure is the median of ``--runs`` runs (default 10) of a whole process, measured
in rounds after an untimed warm-up round: each round runs the baseline and every
command once, so a change of the machine's load hits them alike. Bytecode is written
and used, as for an installed package (``PYTHONDONTWRITEBYTECODE`` is unset). Printed
per command: the median wall time, its difference to the baseline and its ratio, and
the median CPU time (user + system: what the process costs on idle cores, the better
figure on a busy machine), against the budgets:

* ``ingestd --help``, ``status``, ``sources``: at most 0.3 s more than the baseline;
* ``ingestd search`` through a running daemon (the bench starts one on a small tree of
  md-docs pages): at most 0.3 s more, not counting the query time the daemon reports
  (``elapsed_seconds`` of its answer, shown with ``--log-level DEBUG``);
* a no-op ``ingestd resync`` of md-docs (768 files, nothing changed): at most 1.5 s.

The no-op resync needs md-docs indexed once in a state dir that is kept between runs
(default ``/tmp/ingestd-bench-cli/md-docs-state``, ``--state-dir``): the first run
indexes it with the real model, which takes many minutes of embedding (tens on a busy
2-core machine); later runs reuse it. ``--skip-resync`` leaves that part out.

Usage: ``python bench/cli.py [--runs 10] [--state-dir DIR] [--skip-resync]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CORPUS = HERE.parent.parent / "shared" / "corpora" / "md-docs"
DEFAULT_STATE = Path(tempfile.gettempdir()) / "ingestd-bench-cli" / "md-docs-state"
SMALL = (
    "docs/collector/quick-start.md",
    "docs/concepts/glossary.md",
    "docs/languages/python/exporters.md",
)
QUERY = "how do I export traces to the console in python"
_DAEMON_TOOK = re.compile(r"search: the daemon took ([\d.]+) s")


def ingestd() -> list[str]:
    exe = Path(sys.executable).parent / "ingestd"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ingestd.daemon"]


def timed(
    cmd: list[str], env: dict[str, str]
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall seconds, CPU seconds (user + system) and the result of one process."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), proc


def ensure_indexed(state: Path, env: dict[str, str]) -> None:
    if (state / "manifest.db").exists():
        res = subprocess.run(
            [*ingestd(), "status", "--state-dir", str(state), "--json"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        src = json.loads(res.stdout)["sources"]
        if src and src[0]["last_sync"] is not None and src[0]["pending"] == 0:
            return
    print(
        f"indexing md-docs into {state} (once; many minutes of embedding; kept for later runs)",
        flush=True,
    )
    subprocess.run([*ingestd(), "resync", "--state-dir", str(state), str(CORPUS)], check=True)


def start_daemon(tmp: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    root = tmp / "docs"
    for rel in SMALL:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CORPUS / rel, root / rel)
    state = tmp / "state"
    log = (tmp / "daemon.log").open("wb")
    proc = subprocess.Popen(
        [*ingestd(), "run", "--state-dir", str(state), str(root)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the daemon exited:\n{(tmp / 'daemon.log').read_text()[-2000:]}")
        res = subprocess.run(
            [*ingestd(), "status", "--state-dir", str(state), "--json"],
            capture_output=True,
            text=True,
            env=env,
        )
        if (
            res.returncode == 0
            and (json.loads(res.stdout)["daemon"] or {}).get("phase") == "watching"
        ):
            break
        time.sleep(0.5)
    else:
        sys.exit("the daemon did not finish its first reconcile in 600 s")
    warm = subprocess.run(
        [*ingestd(), "search", "--state-dir", str(state), QUERY],
        capture_output=True,
        text=True,
        env=env,
    )
    if warm.returncode != 0:  # the first search loads the model in the daemon
        sys.exit(f"search failed: {warm.stderr}")
    return proc, state


def _ok(flag: bool) -> str:
    return "ok" if flag else "OVER"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.epilog = __doc__.split("\n\n", 1)[1]
    ap.add_argument("--runs", type=int, default=10, help="processes per command (median)")
    ap.add_argument("--state-dir", type=Path, default=DEFAULT_STATE, help="md-docs state dir")
    ap.add_argument("--skip-resync", action="store_true", help="leave out the md-docs resync")
    args = ap.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    # as installed: pip compiles bytecode at install time; an editable checkout gets
    # its __pycache__ in the untimed warm-up round
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("INGESTD_STATE_DIR", None)
    env.pop("INGESTD_CONFIG", None)
    env.pop("INGESTD_SOCKET", None)

    from _provenance import provenance

    if not args.skip_resync:
        ensure_indexed(args.state_dir, env)
    tmp = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    daemon, dstate = start_daemon(tmp, env)
    daemon_took: list[float] = []

    def search_cost(proc: subprocess.CompletedProcess[str]) -> float:
        m = _DAEMON_TOOK.search(proc.stderr)
        if proc.returncode != 0 or m is None:
            sys.exit(f"search failed or reported no query time:\n{proc.stderr[-2000:]}")
        daemon_took.append(float(m.group(1)))
        return float(m.group(1))

    commands: list[tuple[str, list[str], Callable[[subprocess.CompletedProcess[str]], float]]] = [
        ("python -c pass", [sys.executable, "-c", "pass"], lambda p: 0.0),
        ("ingestd --help", [*ingestd(), "--help"], lambda p: 0.0),
        ("ingestd status", [*ingestd(), "status", "--state-dir", str(dstate)], lambda p: 0.0),
        ("ingestd sources", [*ingestd(), "sources", "--state-dir", str(dstate)], lambda p: 0.0),
        (
            "ingestd search (daemon)",
            [*ingestd(), "search", "--state-dir", str(dstate), "--log-level", "DEBUG", QUERY],
            search_cost,
        ),
    ]
    if not args.skip_resync:
        commands.append(
            (
                "ingestd resync (no-op, md-docs)",
                [*ingestd(), "resync", "--state-dir", str(args.state_dir), str(CORPUS)],
                lambda p: 0.0,
            )
        )
    times: dict[str, list[float]] = {name: [] for name, _, _ in commands}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in commands}
    try:
        for rnd in range(args.runs + 1):  # round 0 warms up (bytecode, page cache)
            for name, cmd, minus in commands:
                t, c, proc = timed(cmd, env)
                if proc.returncode != 0:
                    sys.exit(f"{name} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
                if name.startswith("ingestd resync") and " 0 indexed" not in proc.stdout:
                    sys.exit(f"the resync was not a no-op:\n{proc.stdout[-2000:]}")
                cost = t - minus(proc)
                if rnd:
                    times[name].append(cost)
                    cpus[name].append(c)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(120)
        shutil.rmtree(tmp, ignore_errors=True)

    base = statistics.median(times["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    print(provenance())
    print(
        f"median of {args.runs} whole processes, load average {os.getloadavg()[0]:.1f}; "
        "CPU = user + system seconds of the process (what it costs on idle cores)"
    )
    head = ("command", "wall s", "- base", "ratio", "CPU s", "- base")
    print(f"{head[0]:32} {head[1]:>7} {head[2]:>7} {head[3]:>6} {head[4]:>6} {head[5]:>7}  budget")
    for name, _, _ in commands:
        med, cpu = statistics.median(times[name]), statistics.median(cpus[name])
        if name == "python -c pass":
            budget = ""
        elif name.startswith("ingestd resync"):
            budget = f"<= 1.5 s total: wall {_ok(med <= 1.5)}, CPU {_ok(cpu <= 1.5)}"
        else:
            budget = f"<= +0.3 s: wall {_ok(med - base <= 0.3)}, CPU {_ok(cpu - base_cpu <= 0.3)}"
        print(
            f"{name:32} {med:7.3f} {med - base:7.3f} {med / base:5.1f}x {cpu:6.3f} "
            f"{cpu - base_cpu:7.3f}  {budget}"
        )
    if daemon_took:
        took = statistics.median(daemon_took)
        print(f"(search: the daemon's reported query time, median {took:.3f} s, is not counted)")


if __name__ == "__main__":
    main()
