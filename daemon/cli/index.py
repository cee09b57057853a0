"""The commands that change or check the index: ``resync``, ``sync``, ``verify``, ``forget``...

... and ``sources``. ``sync`` fetches git sources first (a push made searchable).

``resync``, ``verify`` and ``forget`` go through the running daemon when there is one,
else open the state dir under its lock (:func:`~ingestd.daemon.cli.shared.state.runner`);
``sources`` reads the manifest, or asks the daemon given ``--socket``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ingestd.daemon.cli.embedding import migration_costs
from ingestd.daemon.cli.shared.errors import Fatal, handle_errors
from ingestd.daemon.cli.shared.options import common_options, echo_json, socket_option
from ingestd.daemon.cli.shared.progress import sync_progress
from ingestd.daemon.cli.shared.state import (
    busy_note,
    load,
    load_light,
    manifest_reader,
    runner,
    source_names,
    split_targets,
    with_manifest_sources,
)
from ingestd.daemon.commands.status_text import format_when
from ingestd.daemon.sources.shown import recorded_status, shown_by

if TYPE_CHECKING:
    from ingestd.daemon.config import Config

__all__ = ["forget", "resync", "sources", "sync_sources", "verify"]

logger = logging.getLogger("ingestd")


@click.command()
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
@click.argument("targets", nargs=-1, metavar="[SOURCE | PATH]...")
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
    targets: tuple[str, ...],
) -> None:
    """Reconcile the store with the files once; exit 0 when they match.

    SOURCE is a source's name (as `ingestd sync` takes it: of --config, else one the
    state dir knows); PATH a folder, which becomes a source of its own. Without
    either, re-syncs every source of --config, else every source the state dir knows.
    Exit 3 when the mass-deletion guard held deletions (see --allow-mass-delete).
    A store that lost points or a manifest that lost records is repaired first, from
    the other half of the state. --rebuild first moves a damaged manifest.db or
    embedded store aside (renamed *.damaged-TIME, never deleted), then rebuilds it.

    Example:

    
        ingestd resync --state-dir ./state ./docs
        ingestd resync --config ingestd.yaml --allow-mass-delete book
        ingestd resync --dry-run --json ./docs | jq '.sources[0].add'
    """
    from ingestd.daemon.client.local import locked_engine
    from ingestd.daemon.commands.index.resync import resync as resync_cmd

    cfg, sd = load(config_path, (), state_dir, log_level)
    names, paths = split_targets(cfg, sd, targets)
    if paths:
        cfg, sd = load(config_path, paths, state_dir, log_level)
    require_known_roots(cfg, sd, paths)
    args = {"full": full, "dry_run": dry_run, "allow_mass_delete": allow_mass_delete}
    selected = names or source_names(cfg, paths)
    if dry_run:  # what the real run would refuse before writing anything, said first
        from ingestd.daemon.config.installed import install_problems

        missing = install_problems(cfg, sd)
        if missing:
            raise Fatal("; ".join(missing))

    def local() -> Any:
        c = with_manifest_sources(cfg, sd, config_path is not None)
        if not c.sources:
            raise Fatal("nothing to sync: give PATH arguments or --config", 2)
        with locked_engine(c, sd, "ingestd resync") as engine, sync_progress(as_json) as bar:
            return resync_cmd(engine, names or None, progress=bar, **args)

    if rebuild:
        result = _rebuild(cfg, sd, config_path is not None, args, as_json)
    else:
        remote_args = {"sources": selected, **args}
        with busy_note("resync"):
            result = runner(sd, socket_path).call("resync", remote_args, local)
    if dry_run and config_path is not None:
        # what this config would cost (a running daemon may still run the previous one)
        result["migrations"] = migration_costs(cfg, sd)
    _print_resync(result, as_json, dry_run)
    sys.exit(int(result["exit_code"]))


def require_known_roots(cfg: Config, sd: Path, paths: Sequence[str]) -> None:
    """Refuse a ``PATH`` that does not exist unless it is the root of a recorded source.

    A source's root that is missing (an unmounted volume) is a state the commands
    report (exit 1, nothing deleted); any other missing ``PATH`` is a typo.

    Raises:
        Fatal: exit code 2, a ``PATH`` is neither a folder nor a known source's root.
    """
    missing = [Path(p).resolve() for p in paths if not Path(p).exists()]
    if not missing:
        return
    with manifest_reader(cfg, sd) as m:
        recorded = m.sources() if m is not None else []
    known = {Path(s["root"]).resolve() for s in recorded if s.get("root")}
    unknown = [str(p) for p in missing if p not in known]
    if unknown:
        raise Fatal(f"no such folder: {', '.join(unknown)}", 2)


def _rebuild(
    cfg: Config, sd: Path, config_given: bool, args: dict[str, Any], quiet: bool
) -> dict[str, Any]:
    """``resync --rebuild``: set damaged parts aside under the lock, then resync."""
    from ingestd.daemon.commands.index.resync import resync as resync_cmd
    from ingestd.daemon.sync.state.damage import set_aside_damaged, sources_in_store
    from ingestd.daemon.wire.statelock import WRITER_WAIT_S, StateLock, StateLockedError

    lock = StateLock(sd)
    try:
        lock.acquire("ingestd resync --rebuild", wait_s=WRITER_WAIT_S)
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
        from ingestd.daemon.engine import Engine

        engine = Engine(cfg, sd)
        try:
            with sync_progress(quiet) as bar:
                return resync_cmd(engine, None, progress=bar, **args)
        finally:
            engine.close()
    finally:
        lock.release()


def _print_plan(s: dict[str, Any]) -> None:
    """One source's plan (``resync --dry-run``); its first line is the summary (``| head -1``)."""
    if s.get("root_missing"):  # nothing listed: what the source and the check say
        note, why = s.get("dry_run_note"), why_missing(s)
        if s.get("remote_ok"):  # a repository not fetched yet that answers: its versions
            click.echo(f"{s['source']}: {note}")
            return
        click.echo(f"{s['source']}: nothing planned: {note or why}")
        if note and why not in note and not why.endswith("not fetched yet"):  # more than note
            click.echo(f"  {why}")
        return
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
    for version, n in (s.get("removed_versions") or {}).items():
        click.echo(f"  version {version} is gone from the repository: its {n} documents deleted")
    if s.get("dry_run_note"):
        click.echo(f"  {s['dry_run_note']}")


def why_missing(s: dict[str, Any]) -> str:
    """Why a source of a result could not be listed, in its own words.

    A folder's root that is missing, a repository not fetched yet or refused: each
    source says it (``why_missing``); an older daemon's answer lacks it.
    """
    return str(s.get("why_missing") or f"the root folder of {s['source']} is missing")


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
        if s.get("fetch_error") and not s.get("root_missing"):
            click.echo(
                f"  the fetch failed, synced from the last copy: {s['fetch_error']}", err=True
            )
        if s.get("root_missing"):
            click.echo(f"  {why_missing(s)}: nothing synced or deleted", err=True)
        for version, n in (s.get("removed_versions") or {}).items():
            click.echo(f"  version {version} is gone from the repository: {n} documents deleted")
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


@click.command()
@common_options
@socket_option
@click.option("--repair", is_flag=True, help="Fix the differences found.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
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
    from ingestd.daemon.client.local import locked_engine, nothing_indexed
    from ingestd.daemon.commands.index.verify import verify as verify_cmd

    cfg, sd = load(config_path, paths, state_dir, log_level)
    require_known_roots(cfg, sd, paths)

    def local() -> Any:
        if not cfg.manifest.url and not cfg.paths(sd).manifest.exists():
            said = nothing_indexed(sd, given_state_dir=state_dir, config=config_path, paths=paths)
            raise Fatal(said, 1)
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
        with locked_engine(c, sd, "ingestd verify", read_only=not repair) as engine:
            return verify_cmd(engine, None, repair=repair)

    remote_args = {"sources": source_names(cfg, paths), "repair": repair}
    with busy_note("verify"):
        result = runner(sd, socket_path).call("verify", remote_args, local)
    if as_json:
        echo_json(result)
    else:
        for r in result["sources"]:
            if r.get("root_missing"):
                click.echo(f"{r['source']}: {why_missing(r)}; not verified, nothing repaired")
                continue
            state = "clean" if r["clean"] else "DIFFERENT"
            writing = r.get("n_writing", 0)
            click.echo(
                f"{r['source']}: {state}: {r['expected']} points expected, "
                f"{r['n_missing']} missing, {r['n_orphans']} orphans, "
                f"{r['n_stale']} stale, {r['n_manifest']} manifest records differ"
                + _bad_vectors(r)
                + (
                    f"; {writing} long document(s) being written, not compared (verify "
                    "again once written)"
                    if writing
                    else ""
                )
            )
            for x in r.get("writing", [])[:20]:
                click.echo(f"  writing: {x}")
            for key in ("missing", "orphans", "stale", "nonfinite", "cache", "manifest"):
                for x in r[key][:20]:
                    click.echo(f"  {key}: {x}")
    sys.exit(0 if result["clean"] else 1)


@click.command()
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
        st = runner(sd, socket_path).ask("status", {})
        rows = st["sources"]
    else:
        from ingestd.daemon.sync.state.clean_close import seed_counts

        with manifest_reader(cfg, sd) as m:
            if m is not None:  # the last clean close's counts: nothing is counted
                seed_counts(m, m.path, sd)
            recorded = m.sources() if m is not None else []
            rows = [
                {
                    "source": s["name"],
                    **s,
                    **m.counts(s["name"]),
                    **recorded_status(Path(s["root"])),
                }
                for s in recorded
                if m is not None
            ]
    if not rows:
        click.echo("no sources")
    now = time.time()
    for r in rows:
        kind = shown_by(r)
        click.echo(f"{r['source']}\t{kind.where(r)}\t{r['collection']}\t{r['documents']} documents")
        for line in kind.sources_lines(r, lambda t: format_when(t, now)):
            click.echo(line)


@click.command()
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
    root. An unknown name exits 2 and lists the known sources. A source the running
    daemon (or --config) configures exits 2: remove it from the config and reload
    the daemon first, so that nothing watches a source with nothing indexed.

    Example:

    
        ingestd forget --state-dir ./state /srv/docs/old-tree
    """
    from ingestd.daemon.client.local import locked_engine
    from ingestd.daemon.commands.index.forget import forget as forget_cmd
    from ingestd.daemon.commands.index.forget import known_source

    cfg, sd = load_light(config_path, state_dir, log_level)
    root = os.path.realpath(source) if os.path.isdir(source) else None
    args = {"source": source, "root": root}

    def local() -> Any:
        with manifest_reader(cfg, sd) as m:
            if m is None:
                raise Fatal(f"unknown source: {source}; nothing is indexed in {sd}", 2)
            name = known_source(m, source, root)
        configured = [s.name for s in cfg.sources] if cfg is not None else []
        c = cfg if cfg is not None else load(None, (), state_dir, log_level)[0]
        c = with_manifest_sources(c, sd, config_path is not None)
        with locked_engine(c, sd, "ingestd forget") as engine:
            return forget_cmd(engine, name, configured=configured)

    result = runner(sd, socket_path).call("forget", args, local)
    click.echo(f"forgot {result['source']}: {result['points_deleted']} points deleted")


@click.command("sync")
@common_options
@socket_option
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Give up waiting after this many seconds (a daemon goes on).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.argument("names", nargs=-1)
@handle_errors
def sync_sources(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    timeout_s: float | None,
    as_json: bool,
    names: tuple[str, ...],
) -> None:
    """Sync the sources NAMES (default: all) now; return when they are searchable.

    A git source is fetched from its server first, so a commit pushed before the call
    is searchable when it returns: a git server's post-receive hook or a forge's
    webhook calls this (see docs/guides/git-sources.md). Exit 1 when something could
    not be made searchable (the summary says why).

    Example:

    
        ingestd sync --config ingestd.yaml book
    """
    from ingestd.daemon.client import Client

    _cfg, sd = load_light(config_path, state_dir, log_level)
    client = Client(sd, socket=socket_path, config=config_path)
    report = client.sync(None, sources=list(names) or None, timeout_s=timeout_s)
    if as_json:
        echo_json(report)
    else:
        for line in report["summary"]:
            click.echo(line)
    sys.exit(0 if report["complete"] else 1)


def _bad_vectors(report: dict[str, Any]) -> str:
    """``; N vectors not finite ...`` of a verify report, or nothing when there are none."""
    stored, cached = report.get("n_nonfinite", 0), report.get("n_cache", 0)
    if not stored and not cached:
        return ""
    return (
        f"; {stored} stored and {cached} cached vector(s) with NaN, infinity or no length "
        "(--repair embeds them again)"
    )
