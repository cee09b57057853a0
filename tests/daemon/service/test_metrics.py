"""Prometheus metrics: served on loopback only when ``metrics.port`` is set; scraped here."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.daemon.harness import Harness
from tests.helpers import CountingEmbedder, copy_tree

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

PAGES = ("blog/2023/php-beta-release.md", "blog/2023/integrations.md")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k != "source")
            out[s.name + (f"{{{labels}}}" if labels else "")] = s.value
    return out


def test_metrics_off_by_default(
    tmp_path: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    root = copy_tree(tmp_path / "docs", PAGES)
    with Harness(root, scratch / "state", fake_embedder) as h:
        assert h.service.metrics is None


@pytest.mark.slow
def test_metrics_are_scraped_on_loopback(
    tmp_path: Path, scratch: Path, fake_embedder: CountingEmbedder, no_thread_leaks: None
) -> None:
    root = copy_tree(tmp_path / "docs", PAGES)
    port = _free_port()
    with Harness(root, scratch / "state", fake_embedder, metrics={"port": port}) as h:
        assert h.service.metrics.port == port
        m = _scrape(port)
        assert m["ingestd_documents"] == 2
        chunks = m["ingestd_chunks"]
        assert chunks > 0
        assert m["ingestd_chunks_embedded_total"] == len(fake_embedder.texts) > 0
        assert m["ingestd_embedding_calls_total"] >= 1
        assert m["ingestd_queue_depth"] == 0
        assert m["ingestd_up"] == 1
        assert m["ingestd_reused_vector_ratio"] == 0.0

        # a rename reuses every vector; its batch is observed in the lag histogram
        b = h.service.batches_done
        (root / PAGES[1]).rename(root / "blog/moved.md")
        h.settle(b)
        m = _scrape(port)
        assert m["ingestd_documents"] == 2 and m["ingestd_chunks"] == chunks
        assert m["ingestd_vectors_reused_total"] > 0
        assert 0 < m["ingestd_reused_vector_ratio"] < 1
        assert m["ingestd_edit_to_searchable_seconds_count"] == 1
        assert 0 < m["ingestd_edit_to_searchable_seconds_sum"] < 30
        assert m["ingestd_documents_deleted_total"] == 1
        # loopback only
        assert h.service.metrics._server.server_address[0] == "127.0.0.1"
    with pytest.raises(OSError):
        _scrape(port)  # stopped with the daemon
