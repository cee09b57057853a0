"""``ingestd ui`` on a 100,000-point index: how fast each page answers through a daemon.

A synthetic tree (``--files`` markdown files in 50 folders, each cut by a ``token``
rule of 40 tokens into ~46 chunks: ~100,000 points by default) is indexed once into a
state dir kept in ``--dir`` (the tests' fake vectors, from text hashes: the pages do
not depend on what the vectors mean; a build takes a few minutes). Then a real
``ingestd run`` serves that state dir and a real ``ingestd ui`` serves the pages; each
page is fetched ``--rounds`` times over HTTP, interleaved with the baseline, the UI's
stylesheet (the server's own floor), and p50/p95 are printed in ms with the ratio of
p50 to the baseline's.

Pages: the overview, the files page of the root and of one folder (44 files), one
file's chunks (46), and searches in sparse and hybrid mode, with and without a token
budget (hybrid embeds the query with the bundled model, loaded by the daemon on the
first one, which is left out).

Target (issue 42): every page of a 100k-point index answers in <= 200 ms.

Usage::

    python bench/ui.py                           # 2,200 files, ~100k points
    python bench/ui.py --files 200 --rounds 10   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.helpers import fake_vectors

FOLDERS = 50
WORDS = (
    "collector exporter span metric sampler pipeline config batch queue retry endpoint "
    "receiver processor trace log resource attribute context baggage propagator"
).split()


def write_tree(root: Path, files: int) -> None:
    """``files`` markdown files of ~50 short sections each, in :data:`FOLDERS` folders."""
    rng = np.random.default_rng(0)
    for k in range(files):
        path = root / f"area{k % FOLDERS:02d}" / f"page{k:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        parts = [f"# Page {k}\n"]
        for s in range(50):
            words = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), 28))
            parts.append(f"## Section {s}\n\nThe {words}.\n")
        path.write_text("\n".join(parts))


def build(base: Path, files: int) -> Path:
    """The config of the indexed tree in ``base`` (built on first use)."""
    config = base / "config.yaml"
    if (base / "built").is_file():
        return config
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    write_tree(base / "docs", files)
    rule = {"match": ["*.md"], "chunker": "token", "params": {"max_tokens": 40, "overlap": 0}}
    cfg = {
        "sources": [{"name": "bench", "root": str(base / "docs")}],
        "rules": [rule],
        "watch": {"rescan_interval_s": 0},
    }
    config.write_text(json.dumps(cfg))
    t = time.perf_counter()
    eng = Engine(load_config(config), base / "state", embed_model=fake_vectors)
    try:
        eng.sync("bench")
        chunks = eng.resources.manifest.counts("bench")["chunks"]
    finally:
        eng.close()
    print(f"built {files} files, {chunks} points in {time.perf_counter() - t:.0f} s")
    (base / "built").write_text(str(chunks))
    return config


def _start(cmd: list[str], log: Path, marker: str | None) -> tuple[subprocess.Popen[bytes], str]:
    if marker is None:
        with log.open("w") as out:
            return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT), ""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if select.select([proc.stderr], [], [], 1.0)[0]:
            line = proc.stderr.readline().decode()
            if marker in line:
                return proc, line.split(marker, 1)[1].strip()
    proc.kill()
    raise SystemExit(f"{cmd[1]} did not start")


def _pcts(ts: list[float]) -> tuple[float, float]:
    ts = sorted(ts)
    return ts[len(ts) // 2] * 1000, ts[min(len(ts) - 1, int(0.95 * len(ts)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2200)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/bench-ui"))
    args = ap.parse_args()
    base = args.dir / f"files{args.files}"
    base.mkdir(parents=True, exist_ok=True)
    config = build(base, args.files)
    exe = Path(sys.executable).parent / "ingestd"
    state = str(base / "state")
    daemon, _ = _start(
        [str(exe), "run", "--config", str(config), "--state-dir", state], base / "run.log", None
    )
    ui = None
    try:
        from ingestd.daemon.client import Client

        client = Client(state, local=False, start_wait_s=300)  # waits for its socket
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and daemon.poll() is None:
            d = client.status().get("daemon") or {}
            if d.get("phase") == "watching":
                break
            time.sleep(1)
        if daemon.poll() is not None:
            raise SystemExit(f"ingestd run exited: see {base / 'run.log'}")
        ui, url = _start(
            [str(exe), "ui", "--state-dir", state, "--listen", "127.0.0.1:0"],
            base / "ui.log",
            "listening on ",
        )
        q = "how does the exporter retry a batch"
        pages = {
            "baseline: /static/ui.css": "static/ui.css",
            "overview": "",
            "files, root": "files?source=bench",
            "files, one folder (40 files)": "files?source=bench&folder=area03",
            "a file's chunks": "chunks?source=bench&path=area03/page00003.md",
            "search sparse k=10": f"search?q={q}&k=10&mode=sparse",
            "search hybrid k=10": f"search?q={q}&k=10&mode=hybrid",
            "search hybrid, budget 2048": f"search?q={q}&k=10&mode=hybrid&budget=2048",
        }
        took: dict[str, list[float]] = {name: [] for name in pages}
        with httpx.Client(base_url=url, timeout=120) as http:
            for path in pages.values():  # warm up: the daemon loads the model here
                r = http.get("/" + path)
                assert r.status_code == 200, (path, r.status_code, r.text[:500])
            for _ in range(args.rounds):
                for name, path in pages.items():
                    t = time.perf_counter()
                    r = http.get("/" + path)
                    took[name].append(time.perf_counter() - t)
                    assert r.status_code == 200
        points = (base / "built").read_text()
        print(
            f"ingestd ui on {points} points, {args.files} files; {args.rounds} rounds; "
            f"load {os.getloadavg()[0]:.2f}"
        )
        floor = _pcts(took["baseline: /static/ui.css"])[0]
        print(f"{'page':32} {'p50 ms':>8} {'p95 ms':>8} {'p50/baseline':>13}")
        for name, ts in took.items():
            p50, p95 = _pcts(ts)
            print(f"{name:32} {p50:8.1f} {p95:8.1f} {p50 / floor:13.1f}")
    finally:
        for proc in (ui, daemon):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=120)


if __name__ == "__main__":
    main()
