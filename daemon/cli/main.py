"""The ``ingestd`` command line (click).

Exit codes (after pre-commit's ``error_handler.py``): 0 success, 1 a known failure
(``verify`` found differences, a locked state dir, files left to retry), 2 a usage or
config error (an unknown source name included), 3 deletions held by the mass-deletion
guard (``resync``) or an unexpected error, 130 interrupted.

Start-up cost is part of the interface: this module imports click and the standard
library only, and each command imports what it needs. ``--help``, ``status``,
``sources`` and a ``search`` answered by a running daemon build no pydantic model and
import neither SQLAlchemy, tiktoken, qdrant-client nor torch (``bench/cli.py`` times
them; ``tests/daemon/test_cli_operator.py`` checks the imports). How a command reaches
the daemon or the state dir is :mod:`~ingestd.daemon.cli.state`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ingestd.daemon.cli.errors import Fatal, handle_errors
from ingestd.daemon.cli.options import common_options, echo_json, socket_option
from ingestd.daemon.cli.progress import sync_progress
from ingestd.daemon.cli.state import (
    ask_daemon,
    load,
    load_light,
    local_engine,
    manifest_reader,
    run_command,
    source_names,
    with_manifest_sources,
)

if TYPE_CHECKING:
    from ingestd.daemon.config import Config

__all__ = ["cli", "main"]

logger = logging.getLogger("ingestd")
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="ingestd", prog_name="ingestd")
def cli() -> None:
    """Keep a Qdrant collection in sync with documentation trees.

    Example:

    
        ingestd run ./docs            # watch ./docs, index it, keep it in sync
        ingestd search "how do I configure the exporter"
    """


@cli.command()
@common_options
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False))
@handle_errors
def run(
    config_path: Path | None, state_dir: Path | None, log_level: str | None, paths: tuple[str, ...]
) -> None:
    """Watch the sources and keep the store in sync until SIGTERM/SIGINT.

    Opens the store, sets the watches, serves the control socket, tells systemd it
    is ready, then reconciles every source in the background. SIGHUP reloads the
    config; SIGTERM finishes the write batch in flight and exits 0.

    Example:

    
        ingestd run --state-dir ./state ./docs
    """
    from ingestd.daemon.config import load_config
    from ingestd.daemon.service.control import StateLockedError
    from ingestd.daemon.service.service import Service

    cfg, sd = load(config_path, paths, state_dir, log_level, require_roots=False)
    if not cfg.sources:
        raise Fatal("nothing to watch: give PATH arguments or sources in --config", 2)

    def reload() -> Config:
        return load_config(config_path, roots=paths, require_roots=False)

    try:
        code = Service(cfg, sd, reload_config=reload).serve()
    except StateLockedError as exc:
        raise Fatal(str(exc)) from None
    # Everything is closed and logged ("ingestd stopped"): skip the interpreter's
    # teardown of torch and its thread pools, which takes seconds (systemd's stop
    # timeout and SIGTERM's promise count them).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@cli.command()
@common_options
@socket_option
@click.option("--full", is_flag=True, help="Re-hash every file (no stat fast path).")
@click.option("--dry-run", is_flag=True, help="Print the planned changes; write nothing.")
@click.option("--allow-mass-delete", is_flag=True, help="Apply deletions the guard would hold.")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Move a damaged manifest or store aside and rebuild it from the rest of the state.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False))
@handle_errors
def resync(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    full: bool,
    dry_run: bool,
    allow_mass_delete: bool,
    rebuild: bool,
    as_json: bool,
    paths: tuple[str, ...],
) -> None:
    """Reconcile the store with the files once; exit 0 when they match.

    Without PATH or --config, re-syncs the sources the state dir already knows.
    Exit 3 when the mass-deletion guard held deletions (see --allow-mass-delete).
    A store that lost points or a manifest that lost records is repaired first, from
    the other half of the state. --rebuild first moves a damaged manifest.db or
    embedded store aside (renamed *.damaged-TIME, never deleted), then rebuilds it.

    Example:

    
        ingestd resync --state-dir ./state ./docs
        ingestd resync --dry-run --json ./docs | jq '.sources[0].add'
    """
    from ingestd.daemon.commands import commands

    cfg, sd = load(config_path, paths, state_dir, log_level)
    args = {"full": full, "dry_run": dry_run, "allow_mass_delete": allow_mass_delete}

    def local() -> Any:
        c = with_manifest_sources(cfg, sd, config_path is not None)
        if not c.sources:
            raise Fatal("nothing to sync: give PATH arguments or --config", 2)
        with local_engine(c, sd, "ingestd resync") as engine, sync_progress(as_json) as bar:
            return commands.resync(engine, None, progress=bar, **args)

    if rebuild:
        result = _rebuild(cfg, sd, config_path is not None, args, as_json)
    else:
        remote_args = {"sources": source_names(cfg, paths), **args}
        result = run_command(sd, "resync", remote_args, socket_path, local)
    if dry_run and config_path is not None:
        # what this config would cost (a running daemon may still run the previous one)
        result["migrations"] = _migration_costs(cfg, sd)
    _print_resync(result, as_json, dry_run)
    sys.exit(int(result["exit_code"]))


def _rebuild(
    cfg: Config, sd: Path, config_given: bool, args: dict[str, Any], quiet: bool
) -> dict[str, Any]:
    """``resync --rebuild``: set damaged parts aside under the lock, then resync."""
    from ingestd.daemon.commands import commands
    from ingestd.daemon.service.control import StateLock, StateLockedError
    from ingestd.daemon.sync.repair import set_aside_damaged, sources_in_store

    lock = StateLock(sd)
    try:
        lock.acquire("ingestd resync --rebuild")
    except StateLockedError as exc:
        raise Fatal(str(exc)) from None
    try:
        for note in set_aside_damaged(cfg, sd):
            logger.warning("%s", note)
        cfg = with_manifest_sources(cfg, sd, config_given)
        if not cfg.sources and not config_given:
            cfg = cfg.model_copy(update={"sources": sources_in_store(cfg, sd)})
        if not cfg.sources:
            raise Fatal("nothing to sync: give PATH arguments or --config", 2)
        from ingestd.daemon.sync.engine import Engine

        engine = Engine(cfg, sd)
        try:
            with sync_progress(quiet) as bar:
                return commands.resync(engine, None, progress=bar, **args)
        finally:
            engine.close()
    finally:
        lock.release()


def _print_plan(s: dict[str, Any]) -> None:
    """One source's plan (``resync --dry-run``)."""
    click.echo(
        f"{s['source']}: {len(s['add'])} to add, {len(s['update'])} to update, "
        f"{len(s['rekey'])} to re-key, {len(s['delete'])} to delete, "
        f"{s['stat_only']} touched with unchanged content, {s['unchanged']} unchanged"
    )
    for key, sign in (("add", "+"), ("update", "~"), ("delete", "-")):
        for p in s[key]:
            click.echo(f"  {sign} {p}")
    for mv in s["rekey"]:
        click.echo(f"  > {mv['from']} -> {mv['to']}")
    for p in s["held_deletes"]:
        click.echo(f"  - {p} (held by the mass-deletion guard)")
    if s.get("root_missing"):
        click.echo(f"  the root folder of {s['source']} is missing: nothing planned")


def _print_resync(result: dict[str, Any], as_json: bool, dry_run: bool) -> None:
    if as_json:
        echo_json(result)
        return
    for cost in result.get("migrations", []):
        click.echo(cost["summary"])
    for s in result["sources"]:
        if dry_run:
            _print_plan(s)
            continue
        click.echo(
            f"{s['source']}: {s['indexed']} indexed, {s['deleted']} deleted, "
            f"{s['failed']} failed; {s['chunks_written']} chunks written "
            f"({s['embedded']} embedded, {s['reused']} reused), "
            f"{s['chunks_deleted']} deleted"
        )
        if s.get("repaired"):
            r = s["repaired"]
            click.echo(
                f"  repaired first: {r.get('adopted', 0)} points re-recorded in the manifest, "
                f"{r.get('rewritten', 0)} lost points written again, "
                f"{r.get('deleted', 0)} unusable points deleted",
                err=True,
            )
        if s.get("root_missing"):
            click.echo(f"  the root folder of {s['source']} is missing: nothing synced", err=True)
        if s["held"]:
            click.echo(
                f"  {len(s['held'])} deletions held by the mass-deletion guard; "
                "run with --allow-mass-delete to apply them",
                err=True,
            )
        for p in s["retry"]:
            click.echo(f"  could not read {p}; run resync again", err=True)
        for k in s.get("skipped", []):
            click.echo(f"  skipped {k['path']}: {k['reason']}", err=True)


@cli.command()
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
    "--mode",
    type=click.Choice(["hybrid", "dense", "sparse"]),
    help="Ranking: dense + BM25 fused (hybrid), embeddings only, or BM25 only "
    "[default: search.mode, hybrid].",
)
@click.option("--expand", is_flag=True, help="Add each hit's parent section (hierarchical).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print hits as a JSON list, with each hit's rank in the dense and sparse rankings.",
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
    mode: str | None,
    expand: bool,
    as_json: bool,
) -> None:
    """Show the chunks that best answer QUERY (hybrid: embeddings and BM25).

    Example:

    
        ingestd search "how do I configure the collector exporter" -k 3
        ingestd search --path docs/collector --mode sparse "otlp_grpc"
        ingestd search --json "sampling" | jq '.[0] | {path, rank, dense_rank, sparse_rank}'
    """
    from ingestd.daemon.commands import commands

    if not query.strip():
        raise click.UsageError("QUERY is empty")
    cfg, sd = load_light(config_path, state_dir, log_level)
    args: dict[str, Any] = {
        "query": query,
        "k": k,
        "source": source,
        "path": path_prefix,
        "expand": expand,
        "mode": mode,
        "ranks": as_json,
    }

    def local() -> Any:
        c = cfg if cfg is not None else load(None, (), state_dir, log_level)[0]
        c = with_manifest_sources(c, sd, config_path is not None)
        if not c.sources:
            raise Fatal(f"nothing indexed in {sd}: run `ingestd resync PATH` first", 1)
        with local_engine(c, sd, "ingestd search") as engine:
            return commands.search(engine, **args)

    hits = run_command(sd, "search", args, socket_path, local)
    if as_json:
        echo_json(hits)
        return
    if not hits:
        click.echo("no results")
    for i, h in enumerate(hits, 1):
        heading = " > ".join(h.get("heading_path") or [])
        score = f"{h['score']:.4f}" if h.get("mode") == "hybrid" else f"{h['score']:.3f}"
        click.secho(f"{i}. {score}  {h['path']}:{h['start_line']}-{h['end_line']}", bold=True)
        click.echo(f"   source: {h['source']}" + (f"   heading: {heading}" if heading else ""))
        text = h["text"].strip().replace("\n", "\n   ")
        click.echo("   " + (text[:600] + " ..." if len(text) > 600 else text))
        click.echo()


@cli.command()
@common_options
@socket_option
@click.option("--json", "as_json", is_flag=True, help="Print status as JSON.")
@handle_errors
def status(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    as_json: bool,
) -> None:
    """Show per-source documents, chunks, failures, last sync and the daemon's health.

    Exits 1 when the daemon is unhealthy (usable as a container health check). With
    no daemon running, the state dir is read directly (and each source's root is
    checked).

    Example:

    
        ingestd status --state-dir ./state
        ingestd status --state-dir ./state --json | jq '.sources[].chunks'
    """
    from ingestd.daemon.cli.status_text import status_lines

    cfg, sd = load_light(config_path, state_dir, log_level)
    ok, st = ask_daemon(sd, "status", {}, socket_path)
    if not ok:
        from ingestd.daemon.commands.commands import status_of

        with manifest_reader(cfg, sd) as m:
            if m is None:
                st = {"state_dir": str(sd), "sources": [], "daemon": None}
            else:
                st = status_of(m, None, sd)
                st["daemon"] = None
        from ingestd.daemon.service.control import lock_holder

        holder = lock_holder(sd)
        if holder is not None:
            st["locked_by"] = holder[1]
    healthy = st.get("daemon") is None or st["daemon"].get("healthy", True)
    if as_json:
        echo_json(st)
    else:
        for line in status_lines(st, time.time()):
            click.echo(line)
    sys.exit(0 if healthy else 1)


@cli.command()
@common_options
@socket_option
@click.option("--repair", is_flag=True, help="Fix the differences found.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False))
@handle_errors
def verify(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    repair: bool,
    as_json: bool,
    paths: tuple[str, ...],
) -> None:
    """Re-chunk the files and compare with the manifest and the store.

    Exit 0 when files, manifest and store agree; exit 1 listing missing, orphan and
    stale points otherwise. --repair fixes them (vectors come from the cache).

    Example:

    
        ingestd verify --state-dir ./state ./docs
    """
    from ingestd.daemon.commands import commands

    cfg, sd = load(config_path, paths, state_dir, log_level)

    def local() -> Any:
        if not cfg.manifest.url and not (sd / "manifest.db").exists():
            raise Fatal(f"nothing indexed in {sd}: run `ingestd resync PATH` first", 1)
        c = with_manifest_sources(cfg, sd, config_path is not None)
        if not c.sources:
            raise Fatal("nothing to verify: give PATH arguments or --config", 2)
        if paths:  # a PATH names a source; verifying must not create one
            with manifest_reader(cfg, sd) as m:
                known = [s["name"] for s in m.sources()] if m is not None else []
            unknown = [s.name for s in c.sources if s.name not in known]
            if unknown:
                raise Fatal(
                    f"unknown source(s): {', '.join(unknown)}; known sources: "
                    f"{', '.join(known) or 'none'}",
                    2,
                )
        with local_engine(c, sd, "ingestd verify") as engine:
            return commands.verify(engine, None, repair=repair)

    remote_args = {"sources": source_names(cfg, paths), "repair": repair}
    result = run_command(sd, "verify", remote_args, socket_path, local)
    if as_json:
        echo_json(result)
    else:
        for r in result["sources"]:
            state = "clean" if r["clean"] else "DIFFERENT"
            click.echo(
                f"{r['source']}: {state}: {r['expected']} points expected, "
                f"{r['n_missing']} missing, {r['n_orphans']} orphans, "
                f"{r['n_stale']} stale, {r['n_manifest']} manifest records differ"
            )
            for key in ("missing", "orphans", "stale", "manifest"):
                for x in r[key][:20]:
                    click.echo(f"  {key}: {x}")
    sys.exit(0 if result["clean"] else 1)


@cli.command()
@common_options
@socket_option
@click.option(
    "--abort",
    is_flag=True,
    help="Drop the version being built; the current one stays untouched and keeps "
    "its model until the config goes back, or `ingestd migrate` starts again.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what migrating to this config would cost; needs no daemon, changes nothing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def migrate(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    abort: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Start, report or abort the migration to the configured embedding model.

    A new embedding model, tokenizer or embedding.fit_model is a migration: a new
    version of each collection is built in the background while searches answer from
    the current one, then the alias switches (README "Changing the embedding model").
    The daemon starts it on its own when it loads such a config; this command starts it
    again after an abort (with a daemon it goes on there, see `ingestd status`; without
    one it runs here to the end), says what it costs, or aborts it.

    Example:

    
        ingestd migrate --dry-run -c new.yaml   # what the new config would cost
        ingestd migrate --abort                 # drop the partial version
        ingestd migrate                         # start it (again)
    """
    from ingestd.daemon.commands import commands
    from ingestd.daemon.migration import status as migration_status

    cfg, sd = load(config_path, (), state_dir, log_level)
    if not cfg.manifest.url and not (sd / "manifest.db").exists():
        raise Fatal(f"nothing indexed in {sd}: run `ingestd resync PATH` first", 1)
    cfg = with_manifest_sources(cfg, sd, config_path is not None)
    if dry_run:  # from this config, beside a daemon that may run another one
        with manifest_reader(cfg, sd) as m:
            result: dict[str, Any] = {
                "migrations": migration_status.status(m) if m is not None else []
            }
        result["costs"] = _migration_costs(cfg, sd)
        _print_migrate(result, as_json)
        return
    args = {"abort": abort, "start": not abort}

    def local() -> Any:
        with local_engine(cfg, sd, "ingestd migrate") as engine, sync_progress(as_json) as bar:
            out = commands.migrate(engine, **args)
            if out.get("rescan"):
                commands.resync(engine, out["rescan"], progress=bar)
                out = {**out, **commands.migrate(engine)}
            return out

    result = run_command(sd, "migrate", args, socket_path, local)
    _print_migrate(result, as_json)


def _migration_costs(cfg: Config, sd: Path) -> list[dict[str, Any]]:
    """What migrating to ``cfg`` would cost, per collection (manifest and cache reads only)."""
    from ingestd.daemon.migration import migrate as mig
    from ingestd.store.manifest import Manifest, sqlite_url

    m = Manifest(cfg.manifest.url or sqlite_url(sd / "manifest.db"))
    try:
        return [c.as_dict() for c in mig.costs(cfg, sd, m)]
    finally:
        m.close()


def _print_migrate(result: dict[str, Any], as_json: bool) -> None:
    from ingestd.daemon.cli.status_text import migration_lines

    if as_json:
        echo_json(result)
        return
    for a in result.get("aborted", []):
        if a["aborted"]:
            click.echo(
                f"collection {a['collection']}: migration aborted, {a['dropped']} dropped, "
                f"{a['kept']} untouched; set the config back to its model"
            )
        else:
            click.echo(f"collection {a['collection']}: not aborted: {a['reason']}")
    for line in migration_lines(result.get("migrations", []), time.time()):
        click.echo(line)
    for c in result.get("costs", []):
        click.echo(c["summary"])
    if not result.get("migrations") and not result.get("costs") and not result.get("aborted"):
        click.echo("no migration: every collection is made by the configured model")


@cli.command()
@common_options
@socket_option
@handle_errors
def sources(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
) -> None:
    """List the sources the state dir knows: name, root, collection, documents.

    One source per line, tab-separated. With --socket, the running daemon is asked.

    Example:

    
        ingestd sources --state-dir ./state
    """
    cfg, sd = load_light(config_path, state_dir, log_level)
    rows: list[dict[str, Any]]
    if socket_path is not None:
        _, st = ask_daemon(sd, "status", {}, socket_path)
        rows = st["sources"]
    else:
        with manifest_reader(cfg, sd) as m:
            recorded = m.sources() if m is not None else []
            rows = [
                {"source": s["name"], **s, **m.counts(s["name"])} for s in recorded if m is not None
            ]
    if not rows:
        click.echo("no sources")
    for r in rows:
        click.echo(f"{r['source']}\t{r['root']}\t{r['collection']}\t{r['documents']} documents")


@cli.command()
@common_options
@socket_option
@click.argument("source")
@handle_errors
def forget(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    source: str,
) -> None:
    """Remove SOURCE's points from the store and its rows from the manifest.

    SOURCE is a name from `ingestd sources`, or the folder of a source named after its
    root. An unknown name exits 2 and lists the known sources.

    Example:

    
        ingestd forget --state-dir ./state /srv/docs/old-tree
    """
    from ingestd.daemon.commands import commands

    cfg, sd = load_light(config_path, state_dir, log_level)
    root = os.path.realpath(source) if os.path.isdir(source) else None
    args = {"source": source, "root": root}

    def local() -> Any:
        with manifest_reader(cfg, sd) as m:
            if m is None:
                raise Fatal(f"unknown source: {source}; nothing is indexed in {sd}", 2)
            name = commands.known_source(m, source, root)
        c = cfg if cfg is not None else load(None, (), state_dir, log_level)[0]
        c = with_manifest_sources(c, sd, config_path is not None)
        with local_engine(c, sd, "ingestd forget") as engine:
            return commands.forget(engine, name)

    result = run_command(sd, "forget", args, socket_path, local)
    click.echo(f"forgot {result['source']}: {result['points_deleted']} points deleted")


@cli.command("chunk")
@common_options
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--rule", "rule_name", help="Use this configured rule (default: the matching one).")
@click.option("--chunker", "chunker_name", help="Use this strategy instead of a rule.")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Strategy option (with --chunker); repeatable. Values are YAML.",
)
@click.option("--stats", is_flag=True, help="Print count and min/mean/max tokens instead.")
@handle_errors
def chunk_cmd(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    file: Path,
    rule_name: str | None,
    chunker_name: str | None,
    params: tuple[str, ...],
    stats: bool,
) -> None:
    """Preview the chunks of FILE as JSON lines; needs no daemon and no store.

    `source`, `path` and ids are those `resync` would give: from the configured or
    indexed source whose root holds FILE (the deepest one), else from the current
    directory as the source root.

    Example:

    
        ingestd chunk docs/install.md | jq -c '{start_line, n_tokens, heading_path}'
        ingestd chunk --chunker token --param max_tokens=128 --param overlap=16 --stats README.md
    """
    from ingestd.chunkers.text import UndecodableError
    from ingestd.daemon.cli.preview import preview

    cfg, sd = load(config_path, (), state_dir, log_level)
    known: list[tuple[str, str]] = []
    with contextlib.suppress(Fatal), manifest_reader(cfg, sd) as m:
        known = [(s["name"], s["root"]) for s in m.sources()] if m is not None else []
    try:
        for line in preview(
            cfg,
            file,
            rule_name=rule_name,
            chunker_name=chunker_name,
            params=params,
            stats=stats,
            known=known,
        ):
            click.echo(json.dumps(line, ensure_ascii=False))
    except UndecodableError as exc:  # the file, not the command, is at fault
        raise Fatal(f"{file}: {exc}", 1) from None
    except ValueError as exc:
        raise Fatal(str(exc), 2) from None


@cli.command("eval")
@common_options
@click.argument("questions", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--corpus",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The folder the questions' paths are relative to.",
)
@click.option(
    "--rules",
    "rule_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A YAML file with a `rules:` list as in the config; repeatable, one row each "
    "[default: the configured rules].",
)
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice(["hybrid", "dense", "sparse"]),
    help="Search mode; repeatable [default: hybrid, dense and sparse].",
)
@click.option(
    "--resamples",
    default=10_000,
    show_default=True,
    type=click.IntRange(100, 1_000_000),
    help="Bootstrap samples of each interval.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap samples.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON, ranks included.")
@handle_errors
def eval_cmd(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    questions: Path,
    corpus: Path,
    rule_files: tuple[Path, ...],
    modes: tuple[str, ...],
    resamples: int,
    seed: int,
    as_json: bool,
) -> None:
    """Score chunking rules and search modes on QUESTIONS (JSON lines) over a corpus.

    Indexes the corpus with each rule set into a throw-away collection (through the
    daemon when one holds the state dir, else in a scratch state dir; vectors come from
    the state dir's embedding cache), asks every question in each mode and prints
    recall@1/5/10 and MRR@10 at path level (a hit in the gold file) and span level (a
    hit covering the whole answer), and each row's difference to the first row with
    its paired-bootstrap 95% interval. README "Evaluating rules" gives the format.

    Example:

    
        ingestd eval qa.jsonl --corpus ./docs
        ingestd eval qa.jsonl --corpus ./docs --rules small.yaml --rules big.yaml --mode hybrid
    """
    from ingestd.daemon.config import ConfigError
    from ingestd.daemon.evaluation import cli as eval_cli
    from ingestd.daemon.evaluation import report as eval_report
    from ingestd.daemon.evaluation.evaluate import MODES, EvalError
    from ingestd.daemon.evaluation.questions import QuestionError, load_questions
    from ingestd.daemon.evaluation.rulesets import rule_sets

    cfg, sd = load(config_path, (), state_dir, log_level)
    try:
        sets = rule_sets(rule_files, cfg, config_path)
        qs = load_questions(questions, corpus)
    except (ConfigError, QuestionError) as exc:
        raise Fatal(str(exc), 2) from None
    try:
        raw = eval_cli.run(cfg, sd, corpus, qs, sets, modes or MODES)
    except EvalError as exc:
        raise Fatal(str(exc)) from None
    report = eval_report.summarise(
        raw, qs, resamples=resamples, seed=seed, question_set=str(questions)
    )
    if as_json:
        echo_json(report)
    else:
        click.echo(eval_report.format_table(report))


@cli.command("export-model")
@common_options
@click.option(
    "--backend",
    type=click.Choice(["onnx", "onnx-int8"]),
    help="Export for this backend (default: the configured one).",
)
@handle_errors
def export_model(
    config_path: Path | None, state_dir: Path | None, log_level: str | None, backend: str | None
) -> None:
    """Export the embedding model to ONNX now, offline (otherwise done at first use).

    Prints the exported file. Run it before switching embedding.backend, so that the
    daemon starts without the export (it imports torch once, for a minute or so).

    Example:

    
        ingestd export-model --config /etc/ingestd/config.yaml --backend onnx-int8
    """
    from ingestd.store.backends import check_backend, default_cache_dir
    from ingestd.store.embedder import model_info
    from ingestd.store.onnx_export import ExportError, ensure_exported

    cfg, _ = load(config_path, (), state_dir, log_level)
    e = cfg.embedding
    info = model_info(e.model, backend or e.backend)
    if info.backend == "torch":
        raise Fatal("embedding.backend is torch, which needs no export; pass --backend", 2)
    try:
        check_backend(info.backend)
        path, record = ensure_exported(info, e.cache_dir or default_cache_dir())
    except (ExportError, ValueError) as exc:
        raise Fatal(str(exc)) from None
    cos = record.get("probe_cosine", {})
    click.echo(
        f"{path} ({record['bytes'] / 1e6:.1f} MB; cosine to torch on probe texts: "
        f"mean {cos.get('mean', float('nan')):.4f}, min {cos.get('min', float('nan')):.4f})"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: state files are created private (umask 077)."""
    from ingestd.daemon.statedir import private_umask

    private_umask()
    cli.main(args=list(argv) if argv is not None else None, prog_name="ingestd")
