"""``ingestd status`` as text: the status JSON rendered for a person.

Everything the JSON holds that an operator acts on is named in the text: per source
the last complete sync and the last change written (local time and age), documents
(failed ones among them), chunks (those being written among them), held deletions, a
missing root, folders watched and ignored; for the daemon its health, the document in
flight, the roots it waits for, and its inotify watches beside
``fs.inotify.max_user_watches`` with the queue overflows since start. Keys a daemon of
another version does not send are skipped.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from typing import Any

from ingestd.daemon.sources.shown import shown_by

__all__ = ["format_age", "format_duration", "format_when", "migration_lines", "status_lines"]


def format_duration(seconds: float) -> str:
    """A short duration: ``42 s``, ``5 min``, ``3 h``, ``2 days``.

    Args:
        seconds: the duration (rounded; below 1.5 minutes in seconds, below 1.5 hours in
            minutes, below 36 hours in hours, else in days).
    """
    if seconds < 90:
        return f"{max(0.0, seconds):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def format_age(seconds: float) -> str:
    """A short age: ``just now``, ``42 s ago``, ``5 min ago``, ``3 h ago``, ``2 days ago``.

    Args:
        seconds: elapsed time; a negative age (a clock set back) reads ``in the future``.
    """
    if seconds < 0:
        return "in the future"
    if seconds < 1:
        return "just now"
    return f"{format_duration(seconds)} ago"


def format_when(ts: float | None, now: float) -> str:
    """``2025-05-01 12:03:04 CEST (5 min ago)`` in local time, or ``never``.

    Args:
        ts: seconds since the epoch, or ``None``.
        now: the current time, seconds since the epoch.
    """
    if ts is None:
        return "never"
    local = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(ts)).rstrip()
    return f"{local} ({format_age(now - ts)})"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _progress_line(name: str, p: Any) -> str:
    """One running sync: ``indexing docs: 480/2210 documents, 5120 chunks embedded, ...``."""
    if not isinstance(p, dict):  # "done/total" from older daemons
        return f"indexing {name}: {p} documents"
    done, total = p.get("docs_done", 0), p.get("docs_total", "?")
    line = f"{p.get('phase', 'indexing')} {name}: {done}/{total} documents"
    if p.get("chunks_embedded"):
        line += f", {p['chunks_embedded']} chunks embedded"
    eta = p.get("eta_seconds")
    if eta is not None:
        line += f", about {format_duration(float(eta))} left"
    return line


def _budget_line(b: dict[str, Any], overflows: int) -> str:
    """``inotify watches: 15 of 192536 (0.01% of fs.inotify.max_user_watches); ...``."""
    used, limit = b.get("in_use", 0), b.get("limit")
    if limit:
        share = f"{100 * float(b.get('share') or 0):.2f}% of {b.get('limit_key', 'the limit')}"
        line = f"inotify watches: {used} of {limit} ({share})"
    else:
        line = f"inotify watches: {used}"
    return f"{line}; {_plural(overflows, 'queue overflow')} since start"


def _watch_line(s: dict[str, Any]) -> str | None:
    """``watching 15 folders (inotify), 2 ignored (not entered), 0 overflows``."""
    backend = s.get("watch_backend")
    if not backend:
        return None
    watched, ignored = s.get("watched_folders"), s.get("ignored_folders")
    if watched is None:
        line = f"watching every folder ({backend}; folder counts unknown)"
    else:
        line = f"watching {_plural(int(watched), 'folder')} ({backend})"
        if ignored is not None:
            line += f", {int(ignored)} ignored (not watched, not entered)"
    return f"{line}, {_plural(int(s.get('overflows') or 0), 'overflow')}"


def _waiting_text(waiting: dict[str, int]) -> str:
    """``, N documents waiting for a retry (SOURCE: why)`` when a failed job left work."""
    if not waiting:
        return ""
    return (
        f", {sum(waiting.values())} waiting for a retry after an error "
        f"({', '.join(sorted(waiting))}: see last error)"
    )


def _daemon_lines(d: dict[str, Any], st: dict[str, Any], now: float) -> Iterator[str]:
    health = "healthy" if d.get("healthy", True) else "UNHEALTHY"
    yield (
        f"daemon: pid {d.get('pid')}, {d.get('phase', '?')}, {health}; "
        f"queue {d.get('queue_depth', 0)}, lag {float(d.get('lag_seconds') or 0):.1f} s, "
        f"{d.get('scan_documents_left', 0)} documents left to scan"
        + _waiting_text(d.get("documents_waiting") or {})
    )
    started = d.get("started_at")
    if started:
        yield f"  started: {format_when(float(started), now)}"
    for name, p in (d.get("progress") or {}).items():
        yield f"  {_progress_line(name, p)}"
    flight = d.get("in_flight") or []
    for f in [flight] if isinstance(flight, dict) else flight:
        yield (
            f"  in flight: {f.get('path')} of {f.get('source')}: "
            f"{f.get('chunks_done', 0)}/{f.get('chunks_total', '?')} chunks"
            + (" (chunking)" if f.get("phase") == "chunking" else "")
        )
    for root in d.get("missing_roots") or []:
        yield f"  missing root: {root} (nothing there is synced or deleted until it is back)"
    for name in d.get("unwatched_sources") or []:
        yield f"  not watched: {name} (rescanned periodically instead)"
    budget = d.get("watches")
    if isinstance(budget, dict):
        yield f"  {_budget_line(budget, int(d.get('overflows') or 0))}"
    since = d.get("failing_since") or {}
    for name, err in (d.get("last_error") or {}).items():
        when = f" (failing since {format_when(since[name], now)})" if name in since else ""
        yield f"  last error of {name}{when}: {err}"
    for problem in d.get("problems") or []:
        if problem.startswith("a change has waited"):
            yield f"  unhealthy: {problem}"
    if "embedded_since_start" in st:
        yield (
            f"  chunks embedded since start: {st['embedded_since_start']}, "
            f"reused: {st.get('reused_since_start', 0)}"
        )


def command_line(st: dict[str, Any], command: str, *args: str) -> str:
    """An ``ingestd`` command that works as printed for the state dir of status ``st``.

    It names the state dir, and the config file when one is known (the daemon's, or
    the one ``status`` was given: a git source is configured only there).

    Args:
        st: the status JSON (``state_dir``; ``daemon.config`` or ``config``).
        command: the subcommand (``resync``).
        args: its options and arguments.
    """
    config = (st.get("daemon") or {}).get("config") or st.get("config")
    flags = ["--config", str(config)] if config else []
    return shlex.join(["ingestd", command, *flags, "--state-dir", str(st["state_dir"]), *args])


def _source_lines(s: dict[str, Any], now: float, st: dict[str, Any]) -> Iterator[str]:
    name = s["source"]
    kind = shown_by(s)
    yield f"{name} -> collection {s.get('collection')}"
    yield from kind.where_lines(s)
    for w in s.get("warnings") or []:
        yield f"  warning: {w}"
    yield from kind.lines(s, lambda t: format_when(t, now))
    yield f"  last sync: {format_when(s.get('last_sync'), now)}"
    if "last_change_synced" in s:
        yield f"  last change synced: {format_when(s['last_change_synced'], now)}"
    yield (
        f"  {_plural(s.get('documents', 0), 'document')} ({s.get('failed', 0)} failed), "
        f"{_plural(s.get('chunks', 0), 'chunk')} ({s.get('pending', 0)} being written), "
        f"{_plural(int(s.get('held_deletes') or 0), 'held deletion')}"
    )
    for f in s.get("failed_documents") or []:
        yield f"  failed {f['path']}: {f['error']}"
    if s.get("failed", 0) > len(s.get("failed_documents") or []):
        yield f"  (more failed documents: see `{command_line(st, 'status', '--json')}`)"
    for f in s.get("partly_skipped_documents") or []:
        yield f"  partly skipped {f['path']}: {f['note']}"
    if s.get("partly_skipped", 0) > len(s.get("partly_skipped_documents") or []):
        yield f"  (more partly skipped documents: see `{command_line(st, 'status', '--json')}`)"
    for r in s.get("refused") or []:
        yield f"  refused by the store {r['path']}: {r['error']}"
    for k in s.get("skipped") or []:
        yield f"  skipped {k['path']}: {k['reason']}"
    for r in s.get("retrying") or []:
        yield (
            f"  cannot read {r['path']} ({r['error']}); {r['attempts']} tries, "
            f"next in {r['retry_in_seconds']:.0f} s"
        )
    watch = _watch_line(s)
    if watch:
        yield f"  {watch}"
    for f in s.get("unwatched_folders") or []:
        yield f"  not watched {f['path']}: {f['reason']}"
    if s.get("held_deletes"):
        apply = command_line(st, "resync", "--allow-mass-delete", s["source"])
        yield f"  deletions held by the mass-deletion guard: `{apply}` applies them"


def migration_lines(migrations: list[dict[str, Any]], now: float) -> Iterator[str]:
    """The lines of migrations (``status`` JSON ``migrations``), one per collection.

    Args:
        migrations: entries of :func:`ingestd.daemon.migration.status.status`.
        now: the current time, seconds since the epoch.
    """
    for m in migrations:
        if m["phase"] == "aborted":
            yield (
                f"collection {m['collection']}: the migration to {m['to']} was aborted; "
                f"it keeps {m['from']}"
            )
            continue
        line = (
            f"collection {m['collection']}: migration {m['phase']}, "
            f"{m['docs_done']}/{m['docs_total']} documents in {m['version']} "
            f"(searches read {m['current_version']}); {m['from']} -> {m['to']}"
        )
        if m.get("eta_seconds") is not None:
            line += f"; {format_duration(m['eta_seconds'])} left"
        if m.get("waiting_for"):
            line += f"; the switch waits: {m['waiting_for']}"
        yield line


def _manifest_lost_line(lost: dict[str, Any], st: dict[str, Any]) -> str:
    """The manifest is gone (or records nothing) while the store holds points."""
    manifest = f"the manifest {lost['manifest']}" if lost.get("manifest") else "the manifest"
    has_config = (st.get("daemon") or {}).get("config") or st.get("config")
    paths = () if has_config else ("PATH...",)
    fix = command_line(st, "resync", *paths)
    if lost.get("running"):
        return (
            f"error: {manifest} was deleted while the daemon runs: what it records is "
            f"lost when the daemon stops; stop it, then `{fix}` re-records the store's "
            "points in a new manifest"
        )
    n = lost.get("points")
    held = f"{n:,} points" if n is not None else "points (not counted)"
    colls = ", ".join(sorted(lost.get("collections") or {}))
    state = "is missing" if lost.get("missing") else "records no source"
    where = "" if has_config else " (PATH: each source's root folder)"
    return (
        f"error: {manifest} {state}, yet the vector store holds {held} (collection "
        f"{colls}): nothing can be synced or searched by source until `{fix}`{where} "
        "re-records them"
    )


def status_lines(st: dict[str, Any], now: float) -> Iterator[str]:
    """The lines of ``ingestd status`` for status JSON ``st``.

    Args:
        st: the status JSON (the daemon's, or a local one with ``daemon: None``).
        now: the current time, seconds since the epoch (ages are relative to it).
    """
    d = st.get("daemon")
    if d:
        yield from _daemon_lines(d, st, now)
    else:
        yield "daemon: not running"
    if st.get("locked_by"):
        yield f"state dir in use by {st['locked_by']}"
    for problem in st.get("not_installed") or []:
        yield f"not installed: {problem}"
    for note in st.get("store_notes") or []:
        yield f"note: {note}"
    yield f"state dir: {st['state_dir']}"
    for w in st.get("rule_warnings") or []:
        yield f"warning: {w}"
    for r in st.get("unused_rules") or []:
        yield f"rule {r!r} matches no indexed document"
    if st.get("manifest_lost"):
        yield _manifest_lost_line(st["manifest_lost"], st)
    elif not st["sources"]:
        yield "no sources indexed yet"
    for s in st["sources"]:
        yield from _source_lines(s, now, st)
    yield from migration_lines(st.get("migrations") or [], now)
