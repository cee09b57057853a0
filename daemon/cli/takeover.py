"""``ingestd takeover``: make the embedded vector store this state dir's.

A store belongs to the state dir that made it (:mod:`~ingestd.daemon.sync.state.ownership`);
every other state dir is refused. ``ingestd takeover`` is the one way to make it
another's: it says what will happen and asks first (``--yes`` answers for scripts).
"""

from __future__ import annotations

from pathlib import Path

import click

from ingestd.daemon.cli.shared.errors import Fatal, handle_errors
from ingestd.daemon.cli.shared.options import common_options
from ingestd.daemon.cli.shared.state import load

__all__ = ["takeover"]


@click.command()
@common_options
@click.option("--yes", is_flag=True, help="Take it over without asking.")
@handle_errors
def takeover(
    config_path: Path | None, state_dir: Path | None, log_level: str | None, yes: bool
) -> None:
    """Make the embedded store this state dir uses its own, whoever owned it.

    The store's points, every source in it included, become this state dir's: its
    searches return them and its `forget` can delete them. The state dir that owned it
    is refused from then on (it can take it back the same way). Nothing is deleted.
    The store must not be in use (no daemon of the other state dir running).

    Example:

    
        ingestd takeover --state-dir /var/lib/ingestd-new
    """
    from ingestd.daemon.sync.state.ownership import owner_problem, take_over
    from ingestd.store.vectors.engines import embedded, open_embedded

    cfg, sd = load(config_path, (), state_dir, log_level)
    if not embedded(cfg.qdrant):
        raise Fatal("a Qdrant server (qdrant.url) belongs to no state dir: nothing to take", 2)
    folders = cfg.paths(sd).engine_folders()
    owned = {e: f for e, f in folders.items() if owner_problem(f, sd) is not None}
    if not owned:
        click.echo(f"the vector store of state dir {sd} is already its own: nothing to do")
        return
    for folder in owned.values():
        problem = owner_problem(folder, sd)
        click.echo(f"{problem}".split("; state dir ")[0] + ".")
    click.echo(
        f"State dir {sd} will take it over: its points become this state dir's (its "
        "searches return them, its `forget` can delete them), and the state dir that "
        "owned it is refused from then on. Nothing is deleted."
    )
    if not yes:
        click.confirm("Take it over?", abort=True)
    handle = open_embedded(cfg.qdrant.engine, folders)  # the store's locks: nobody uses it
    try:
        for physical in handle.collections():
            handle.point_count(physical)  # opens each collection (its lock) now
        for folder in owned.values():
            before = take_over(folder, sd) or {}
            click.echo(
                f"the vector store {folder} is now state dir {sd}'s "
                f"(it was {before.get('state_dir') or 'another state dir'}'s)"
            )
    finally:
        handle.close()
