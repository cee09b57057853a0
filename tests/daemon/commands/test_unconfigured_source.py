"""A source removed from the config keeps its points (DESIGN.md point 1: removing a source
is an explicit command, ``ingestd forget``), and says so: its search hits are marked
``configured: false`` with a note, and ``status`` warns under it. Before, its hits came
back unmarked and ``status`` listed it like any other source.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers import CountingEmbedder, run_cli

WOMBAT = "# Wombats\n\nA wombat digs burrows with its strong claws and sleeps in the day.\n"
EXPORTER = "# Exporters\n\nThe OTLP exporter sends spans to the collector on port 4317.\n"


def _config(path: Path, *roots: Path) -> Path:
    lines = ["sources:"]
    for r in roots:
        lines += [f"  - name: {r.name}", f"    root: {r}"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_a_source_dropped_from_the_config_is_marked_in_search_and_status(
    tmp_path: Path, real_embedder: CountingEmbedder
) -> None:
    from ingestd.daemon.commands.query.search import answer
    from ingestd.daemon.commands.status import status_of
    from ingestd.daemon.commands.status_text import status_lines
    from ingestd.daemon.config import load_config
    from ingestd.daemon.engine import Engine

    kept, dropped = tmp_path / "kept", tmp_path / "dropped"
    kept.mkdir()
    dropped.mkdir()
    (kept / "exporters.md").write_text(EXPORTER)
    (dropped / "wombats.md").write_text(WOMBAT)
    state = tmp_path / "state"
    both = _config(tmp_path / "both.yaml", kept, dropped)
    eng = Engine(load_config(both), state, embed_model=real_embedder)
    try:
        for name in eng.context.sources:
            assert eng.sync(name).indexed == 1
        hits = answer(eng, "where do wombats sleep", k=2)["hits"]
        assert hits[0]["source"] == "dropped" and "configured" not in hits[0]
    finally:
        eng.close()

    one = _config(tmp_path / "one.yaml", kept)
    eng = Engine(load_config(one), state, embed_model=real_embedder)
    try:
        assert set(eng.context.sources) == {"kept"}
        got = answer(eng, "where do wombats sleep", k=2)
        top = got["hits"][0]
        assert top["source"] == "dropped" and top["configured"] is False
        assert all("configured" not in h for h in got["hits"] if h["source"] == "kept")
        assert any("dropped, which the config no longer has" in n for n in got["notes"])
        st = status_of(eng.resources.manifest, eng, state)
        by_name = {s["source"]: s for s in st["sources"]}
        assert by_name["kept"]["configured"] is True and by_name["kept"]["warnings"] == []
        assert by_name["dropped"]["configured"] is False
        text = "\n".join(status_lines(st, time.time()))
        assert "warning: not in the config: not watched or synced" in text
        assert "`ingestd forget dropped`" in text
    finally:
        eng.close()

    # the command line, no daemon: the same warning, from the config file
    proc = run_cli("status", "--config", str(one), "--state-dir", str(state), "--json")
    by_name = {s["source"]: s for s in json.loads(proc.stdout)["sources"]}
    assert by_name["dropped"]["configured"] is False, proc.stderr
    assert "not in the config" in by_name["dropped"]["warnings"][0]
    # without a config the state dir's sources are the config: nothing to warn about
    proc = run_cli("status", "--state-dir", str(state), "--json")
    assert proc.stdout, (proc.returncode, proc.stderr)
    assert all(s["warnings"] == [] for s in json.loads(proc.stdout)["sources"]), proc.stdout
