"""The commands that read the index: ``search``, ``read`` and ``status``.

They answer through a running daemon without building the config's pydantic models
(:func:`~ingestd.daemon.cli.shared.state.load_light`); without a daemon, ``search`` and
``read`` open the state dir and ``status`` reads the manifest.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ingestd.chunkers.readers.document import cite_text
from ingestd.daemon.cli.shared.errors import Fatal, handle_errors
from ingestd.daemon.cli.shared.options import common_options, echo_json, socket_option
from ingestd.daemon.cli.shared.state import (
    load,
    load_light,
    manifest_reader,
    runner,
    with_manifest_sources,
)
from ingestd.store.search.citation import version_text

if TYPE_CHECKING:
    from ingestd.daemon.config import Config
    from ingestd.daemon.engine import Engine

__all__ = ["read", "search", "status"]


@click.command()
@common_options
@socket_option
@click.argument("query")
@click.option(
    "-k",
    "--limit",
    "k",
    default=5,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Number of chunks.",
)
@click.option("--source", help="Only this source (its name).")
@click.option(
    "--path",
    "path_prefix",
    help="Only this file, or the files under this folder (relative to the source root).",
)
@click.option(
    "--version",
    "version",
    help="Only this version of a versioned source (a git branch or tag name).",
)
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "dense", "sparse"]),
    help="Ranking: dense + BM25 fused (hybrid), embeddings only, or BM25 only "
    "[default: search.mode, hybrid].",
)
@click.option("--expand", is_flag=True, help="Add each hit's parent section (hierarchical).")
@click.option(
    "--budget-tokens",
    type=click.IntRange(1, 32_768),
    help="Print passages instead of chunks: the best hits, those of one file that overlap "
    "or touch merged, until this many tokens (cl100k_base) are filled; -k is then the "
    "most passages.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print hits (or passages) as a JSON list, hits with their rank in the dense and "
    "sparse rankings.",
)
@handle_errors
def search(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    query: str,
    k: int,
    source: str | None,
    path_prefix: str | None,
    version: str | None,
    mode: str | None,
    expand: bool,
    budget_tokens: int | None,
    as_json: bool,
) -> None:
    """Show the chunks that best answer QUERY (hybrid: embeddings and BM25).

    With --budget-tokens, passages: hits of one file that overlap or touch merged into
    one span, the best first until the budget is filled. Notes (a query cut to the
    model's window, documents still being indexed) go to stderr.

    Example:

    
        ingestd search "how do I configure the collector exporter" -k 3
        ingestd search --path docs/collector --mode sparse "otlp_grpc"
        ingestd search --source book --version v2.0 "lifetimes"
        ingestd search --json "sampling" | jq '.[0] | {path, rank, dense_rank, sparse_rank}'
        ingestd search --budget-tokens 2048 "how do I configure the collector exporter"
    """
    from ingestd.daemon.commands.query.search import answer_request
    from ingestd.store.search.query import Filters
    from ingestd.store.search.request import SearchRequest

    if not query.strip():
        raise click.UsageError("QUERY is empty")
    cfg, sd = load_light(config_path, state_dir, log_level)
    request = SearchRequest(
        query,
        k,
        mode,  # type: ignore[arg-type]  # a click.Choice of MODES
        Filters(source=source, path=path_prefix, version=version),
        expand=expand,
        ranks=as_json,
        budget_tokens=budget_tokens,
        strict_version=True,  # an unknown version is a usage error (exit 2)
    )
    local = _on_state_dir(
        cfg, sd, config_path, state_dir, log_level, "search", lambda e: answer_request(e, request)
    )
    got = runner(sd, socket_path).call("search", request.wire(), local)
    if isinstance(got, list):  # a daemon of an earlier version: the hits alone
        got = {"hits": got, "mode": got[0].get("mode", "") if got else mode or "", "notes": []}
    for note in got.get("notes") or []:
        click.echo(f"note: {note}", err=True)
    hits = got["hits"]
    if got.get("passages") is not None:
        _show_passages(got, as_json)
        return
    if as_json:
        echo_json(hits)
        return
    if not hits:
        click.echo(f"no results ({got.get('mode')} search)")
    for i, h in enumerate(hits, 1):
        heading = " > ".join(h.get("heading_path") or [])
        score = f"{h['score']:.4f}" if h.get("mode") == "hybrid" else f"{h['score']:.3f}"
        click.secho(f"{i}. {score}  {h['path']}{cite_text(h)}", bold=True)
        where = f"   source: {h['source']}"
        where += f"   version: {version_text(h)}" if h.get("version") else ""
        click.echo(where + (f"   heading: {heading}" if heading else "") + f"   id: {h['id']}")
        text = h["text"].strip().replace("\n", "\n   ")
        click.echo("   " + (text[:600] + " ..." if len(text) > 600 else text))
        click.echo()


def _show_passages(got: dict[str, Any], as_json: bool) -> None:
    """Print the passages of a budgeted search (JSON, or each with its place and text)."""
    passages = got["passages"]
    if as_json:
        echo_json(passages)
        return
    if not passages:
        click.echo(f"no results ({got.get('mode')} search)")
        return
    click.echo(
        f"{len(passages)} passage(s), {got['tokens']} of {got['budget_tokens']} tokens "
        f"({got.get('mode')} search)",
        err=True,
    )
    page = None
    for p in passages:
        if p.get("page_rank") != page or page is None:  # a page once, its passages under it
            page = p.get("page_rank")
            where = f"   source: {p['source']}"
            where += f"   version: {version_text(p)}" if p.get("version") else ""
            click.secho(f"file {page}: {p['path']}", bold=True)
            click.echo(where)
        heading = " > ".join(p.get("heading_path") or [])
        cut = " (cut to the budget)" if p.get("truncated") else ""
        place = f"{p['path']}{cite_text(p)}"
        click.secho(f"{p['rank']}. {place}  {p['n_tokens']} tokens{cut}", bold=True)
        where = f"   heading: {heading}" if heading else ""
        click.echo(where + f"   ids: {', '.join(p['ids'])}")
        click.echo("   " + p["text"].strip().replace("\n", "\n   "))
        click.echo()


@click.command()
@common_options
@socket_option
@click.argument("chunk_id", required=False)
@click.option(
    "--path",
    help="Instead of CHUNK_ID: an indexed file, relative to its source's root (as hits give it).",
)
@click.option("--source", help="The source of --path, when several hold it.")
@click.option(
    "--version",
    "version",
    help="The branch or tag of a git source's file (needed with --path there).",
)
@click.option("--start-line", type=click.IntRange(1), help="With --path: the first line.")
@click.option("--end-line", type=click.IntRange(1), help="With --path: the last line.")
@click.option(
    "--context",
    default=1,
    show_default=True,
    type=click.IntRange(0, 20),
    help="With CHUNK_ID: neighbouring chunks on each side.",
)
@click.option(
    "--max-lines", default=200, show_default=True, type=click.IntRange(1, 2000), help="Most lines."
)
@click.option(
    "--budget-tokens",
    type=click.IntRange(1, 32_768),
    help="Most tokens (cl100k_base) of the lines; a hit is widened to its section first, "
    "then past it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@handle_errors
def read(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    chunk_id: str | None,
    path: str | None,
    source: str | None,
    version: str | None,
    start_line: int | None,
    end_line: int | None,
    context: int,
    max_lines: int,
    budget_tokens: int | None,
    as_json: bool,
) -> None:
    """Show a search hit widened to its section, or lines of an indexed file.

    CHUNK_ID is a hit's id (`search --json` gives it): its section and the file's lines
    around it, and the chunks they hold. With --path instead: those lines of the file.
    Lines are the file's, or of the text extracted from a notebook, HTML page or PDF,
    with the format's citation of them (pp. 10-11); a git source's file is read at its
    version.

    Example:

    
        ingestd read 0b5f7c8e-2d1a-5b6e-9c3f-4a7d8e9f0a1b
        ingestd read --path docs/install.md --start-line 40 --end-line 80
        ingestd read --source book --version v2.0 --path src/ch10-03-lifetime-syntax.md
    """
    from ingestd.daemon.commands.query.read import read as read_cmd
    from ingestd.daemon.commands.query.read import read_text

    cfg, sd = load_light(config_path, state_dir, log_level)
    args: dict[str, Any] = {
        "id": chunk_id,
        "source": source,
        "path": path,
        "start_line": start_line,
        "end_line": end_line,
        "context": context,
        "max_lines": max_lines,
    }
    if budget_tokens is not None:
        args["budget_tokens"] = budget_tokens
    if version is not None:
        args["version"] = version

    local = _on_state_dir(
        cfg, sd, config_path, state_dir, log_level, "read", lambda e: read_cmd(e, **args)
    )
    got = runner(sd, socket_path).call("read", args, local)
    if as_json:
        echo_json(got)
        return
    click.echo(read_text(got, more="--budget-tokens or --max-lines", sync="run `ingestd sync`"))


def _on_state_dir(
    cfg: Config | None,
    state_dir: Path,
    config_path: Path | None,
    given_state_dir: Path | None,
    log_level: str | None,
    command: str,
    fn: Callable[[Engine], Any],
) -> Callable[[], Any]:
    """``fn(engine)`` on the state dir itself, read-only under its shared reader lock.

    The answer without a daemon: the store is opened read-only and the lock is the
    readers' (:mod:`~ingestd.daemon.wire.statelock`), so a daemon may start meanwhile.

    Without a config, the engine holds the sources the manifest records. Nothing
    indexed (exit 1) names the ``resync`` to run as the command was called
    (``given_state_dir``: its ``--state-dir``).
    """
    from ingestd.daemon.client.local import locked_engine, nothing_indexed

    def local() -> Any:
        c = cfg if cfg is not None else load(None, (), state_dir, log_level)[0]
        c = with_manifest_sources(c, state_dir, config_path is not None)
        unsynced = c.manifest.url is None and not c.paths(state_dir).manifest.exists()
        if not c.sources or unsynced:  # configured sources never synced: no manifest yet
            said = nothing_indexed(state_dir, given_state_dir=given_state_dir, config=config_path)
            raise Fatal(said, 1)
        with locked_engine(c, state_dir, f"ingestd {command}", read_only=True) as engine:
            return fn(engine)

    return local


@click.command()
@common_options
@socket_option
@click.option("--json", "as_json", is_flag=True, help="Print status as JSON.")
@click.option(
    "--live",
    is_flag=True,
    help="Only whether a daemon answers: exit 0 if one does, busy or not (a liveness probe).",
)
@handle_errors
def status(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    as_json: bool,
    live: bool,
) -> None:
    """Show per-source documents, chunks, failures, last sync and the daemon's health.

    Exits 1 when the daemon is unhealthy (a readiness or health check: a change has
    waited over ``watch.max_lag_s``, a watcher died, the store refused a write). With
    no daemon running, the state dir is read directly (and each source's root is
    checked); a damaged manifest or embedded store, or a store that lost points, exits
    1 naming the fix; so does a manifest that is missing (or records nothing) while
    the store holds points. ``--live`` only asks whether a daemon answers (exit 0, else 1):
    the probe that restarts a daemon, which a long burst of changes must not trip.

    Example:

    
        ingestd status --state-dir ./state
        ingestd status --state-dir ./state --json | jq '.sources[].chunks'
    """
    from ingestd.daemon.commands.status_text import status_lines

    cfg, sd = load_light(config_path, state_dir, log_level)
    if live:
        _liveness(sd, socket_path, as_json)

    def local() -> dict[str, Any]:
        from ingestd.daemon.commands.status import local_status, manifest_lost
        from ingestd.daemon.sync.healing.holdings import check_state

        with manifest_reader(cfg, sd) as m:
            st = local_status(m, sd, [s.name for s in cfg.sources] if cfg else None)
            _check_store_files(cfg, sd)
            lost = manifest_lost(m, sd, cfg)
            if lost is not None:
                st["manifest_lost"] = lost
            if m is not None:
                notes = check_state(cfg, sd, m)
                if notes:
                    st["store_notes"] = notes
        return st

    st = runner(sd, socket_path).read("status", {}, local)
    if config_path is not None:  # for the commands the text suggests
        st.setdefault("config", str(config_path.resolve()))
    healthy = st.get("daemon") is None or st["daemon"].get("healthy", True)
    healthy = healthy and not st.get("manifest_lost")
    if cfg is not None:  # what a resync or run of this config would fail on here
        from ingestd.daemon.config.installed import install_problems

        st["not_installed"] = install_problems(cfg, sd)
        healthy = healthy and not st["not_installed"]
    if as_json:
        echo_json(st)
    else:
        for line in status_lines(st, time.time()):
            click.echo(line)
    sys.exit(0 if healthy else 1)


def _liveness(state_dir: Path, socket_path: Path | None, as_json: bool) -> None:
    """``status --live``: exit 0 when a daemon answers, 1 when none does."""
    from ingestd.daemon.wire.errors import NoDaemon

    try:
        st = runner(state_dir, socket_path).ask("status", {}, timeout=30)
    except NoDaemon:
        click.echo("no ingestd daemon answers", err=True)
        sys.exit(1)
    d = st.get("daemon") or {}
    if as_json:
        echo_json({"live": True, "pid": d.get("pid"), "phase": d.get("phase")})
    else:
        click.echo(f"alive: pid {d.get('pid')}, {d.get('phase')}")
    sys.exit(0)


def _check_store_files(cfg: Config | None, state_dir: Path) -> None:
    """Raise when the embedded store's files are damaged (read, never opened: fast).

    Raises:
        ingestd.store.common.damage.StateDamagedError: the damaged file, named.
    """
    from ingestd.daemon.statedir import StatePaths
    from ingestd.daemon.sync.state.ownership import owner_problem
    from ingestd.store.vectors.engines import embedded, files_damage

    if cfg is not None and not embedded(cfg.qdrant):
        return

    paths = cfg.paths(state_dir) if cfg is not None else StatePaths(state_dir)
    for folder in paths.engine_folders().values():
        problem = owner_problem(folder, state_dir)
        if problem is not None:
            raise problem
    damage = files_damage(paths.engine_folders())
    if damage is not None:
        raise damage
