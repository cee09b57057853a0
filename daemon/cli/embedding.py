"""The commands about the embedding model: ``migrate`` to a new one, ``export-model``.

:func:`migration_costs` (what a config's model change would cost) serves
``migrate --dry-run`` and ``resync --dry-run``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from ingestd.daemon.cli.shared.errors import Fatal, handle_errors
from ingestd.daemon.cli.shared.options import common_options, echo_json, socket_option
from ingestd.daemon.cli.shared.progress import sync_progress
from ingestd.daemon.cli.shared.state import load, manifest_reader, runner, with_manifest_sources

if TYPE_CHECKING:
    from ingestd.daemon.config import Config

__all__ = ["export_model", "migrate", "migration_costs"]


@click.command()
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
    the current one, then the alias switches (docs/guides/embedding-model.md).
    The daemon starts it on its own when it loads such a config; this command starts it
    again after an abort (with a daemon it goes on there, see `ingestd status`; without
    one it runs here to the end), says what it costs, or aborts it.

    Example:

    
        ingestd migrate --dry-run -c new.yaml   # what the new config would cost
        ingestd migrate --abort                 # drop the partial version
        ingestd migrate                         # start it (again)
    """
    from ingestd.daemon.client.local import locked_engine, nothing_indexed
    from ingestd.daemon.commands.index.migrate import migrate as migrate_cmd
    from ingestd.daemon.commands.index.resync import resync as resync_cmd
    from ingestd.daemon.migration import status as migration_status

    cfg, sd = load(config_path, (), state_dir, log_level)
    if not cfg.manifest.url and not cfg.paths(sd).manifest.exists():
        said = nothing_indexed(sd, given_state_dir=state_dir, config=config_path)
        raise Fatal(said, 1)
    cfg = with_manifest_sources(cfg, sd, config_path is not None)
    if dry_run:  # from this config, beside a daemon that may run another one
        with manifest_reader(cfg, sd) as m:
            result: dict[str, Any] = {
                "migrations": migration_status.status(m) if m is not None else []
            }
        result["costs"] = migration_costs(cfg, sd)
        _print_migrate(result, as_json)
        return
    args = {"abort": abort, "start": not abort}

    def local() -> Any:
        with locked_engine(cfg, sd, "ingestd migrate") as engine, sync_progress(as_json) as bar:
            out = migrate_cmd(engine, **args)
            if out.get("rescan"):
                resync_cmd(engine, out["rescan"], progress=bar)
                out = {**out, **migrate_cmd(engine)}
            return out

    result = runner(sd, socket_path).call("migrate", args, local)
    _print_migrate(result, as_json)


def migration_costs(cfg: Config, sd: Path) -> list[dict[str, Any]]:
    """What migrating to ``cfg`` would cost, per collection (manifest and cache reads only)."""
    from ingestd.daemon.migration import migrate as mig
    from ingestd.store.manifest.manifest import Manifest, sqlite_url

    m = Manifest(cfg.manifest.url or sqlite_url(cfg.paths(sd).manifest))
    try:
        return [c.as_dict() for c in mig.costs(cfg, sd, m)]
    finally:
        m.close()


def _print_migrate(result: dict[str, Any], as_json: bool) -> None:
    from ingestd.daemon.commands.status_text import migration_lines

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


@click.command("export-model")
@common_options
@click.option(
    "--backend",
    type=click.Choice(["onnx", "openvino", "onnx-int8"]),
    help="Export for this backend (default: the configured one).",
)
@handle_errors
def export_model(
    config_path: Path | None, state_dir: Path | None, log_level: str | None, backend: str | None
) -> None:
    """Make the embedding model's ONNX graph now, offline (otherwise done at first use).

    Prints the graph's file and how close its vectors came to the reference's. Run it
    before switching embedding.backend, or after installing, so that the daemon starts
    with the graph made. A BERT model's graph (the bundled one's) is built from its
    weights, without torch: about 10 s and 0.5 GB at its peak on 2 cores. Any other
    model's is exported through torch (the torch extra): 25 to 35 s, about 1.3 GB.

    Example:

    
        ingestd export-model --config /etc/ingestd/config.yaml --backend onnx-int8
    """
    from ingestd.store.embedding.backends import check_backend, default_cache_dir
    from ingestd.store.embedding.embedder import model_info
    from ingestd.store.embedding.graphs.onnx_export import ExportError
    from ingestd.store.embedding.runtimes.onnx import make_graph

    cfg, _ = load(config_path, (), state_dir, log_level)
    e = cfg.embedding
    info = model_info(e.model, backend or e.backend, endpoint=e.endpoint, prompts=e.prompts)
    if info.recipe is None:  # the backend runs the model as it is
        raise Fatal(
            f"backend {info.backend} runs the model as it is and needs no export; "
            "pass --backend onnx, openvino or onnx-int8",
            2,
        )
    try:
        check_backend(info.backend)
        path, record = make_graph(info, e.cache_dir or default_cache_dir())
    except (ExportError, ValueError) as exc:
        raise Fatal(str(exc)) from None
    cos = record.get("probe_cosine", {})
    how = "built from its weights" if info.recipe.exporter == "builder" else "exported by torch"
    click.echo(
        f"{path} ({record['bytes'] / 1e6:.1f} MB, {how}; cosine to the reference on probe "
        f"texts: mean {cos.get('mean', float('nan')):.4f}, min {cos.get('min', float('nan')):.4f})"
    )
    if info.backend == "openvino":  # compiled and checked as the daemon will
        from ingestd.store.embedding.runtimes.openvino import OpenVinoEmbedder

        ov = cast(OpenVinoEmbedder, OpenVinoEmbedder.from_file(info, path, threads=e.threads))
        ov.load()
        if ov.precision == "onnxruntime":
            click.echo("OpenVINO misses the bound here: onnxruntime runs this graph")
        else:
            click.echo(
                f"OpenVINO runs it in {ov.precision}: cosine to the reference on probe "
                f"texts, min {ov.probe_cosine:.5f}"
            )
