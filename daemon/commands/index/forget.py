"""``forget``: remove a source that is no longer configured from the store and the manifest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ingestd.daemon.wire.errors import DaemonError

if TYPE_CHECKING:
    from ingestd.daemon.engine import Engine
    from ingestd.store.manifest.reader import ManifestReader

__all__ = ["forget", "known_source"]


def known_source(manifest: ManifestReader, source: str, root: str | None = None) -> str:
    """The name of a source the manifest records: ``source`` itself, or the one at ``root``.

    Args:
        manifest: the manifest.
        source: a source name as the user typed it.
        root: the canonical absolute path ``source`` names, when it is an existing
            folder on the caller's side (``forget ./docs`` for the source named after
            its root).

    Raises:
        DaemonError: exit code 2, the source is unknown; the message lists the known ones.
    """
    recorded = manifest.sources()
    names = [s["name"] for s in recorded]
    if source in names:
        return source
    for s in recorded:
        if root is not None and s["root"] == root:
            return str(s["name"])
    known = ", ".join(names) if names else "none (nothing indexed yet)"
    raise DaemonError(f"unknown source: {source}; known sources: {known}", 2)


def forget(
    engine: Engine,
    source: str,
    root: str | None = None,
    configured: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Delete every point and manifest row of a known source that is not configured.

    A configured source is refused: the daemon would go on watching it with nothing
    indexed (a later edit would index that one file, a restart all of them), so the
    index would differ from the files until then. It is removed from the config and
    the daemon reloaded first; then nothing watches it, and forgetting it is final.

    Args:
        engine: the engine.
        source: the source's name (or, with ``root``, a path naming it).
        root: see :func:`known_source`.
        configured: names of the configured sources (default: the engine's, as in
            the daemon; the CLI without a daemon passes those of ``--config``).

    Raises:
        DaemonError: exit code 2, the source is unknown or configured.
    """
    name = known_source(engine.resources.manifest, source, root)
    if configured is None and name in engine.context.sources:
        raise DaemonError(
            f"source {name} is configured in the running daemon, which would go on "
            "watching it with nothing indexed: remove it from the daemon's config and "
            "reload the daemon (`systemctl reload ingestd`, or SIGHUP; one started with "
            "PATH arguments: restart it without that PATH), then forget it",
            2,
        )
    if configured is not None and name in configured:
        raise DaemonError(
            f"source {name} is in the config given with --config, and a daemon started "
            "with it would index it again: remove it from the config first",
            2,
        )
    n = engine.forget(name)
    return {"source": name, "points_deleted": n}
