"""Long documents written in the background, one slice per step, between other work.

A change that shares a batch, a scan or a queue position with a long document must
not wait for it (DESIGN.md, "Long work is sliced"). So when the daemon syncs (a scan,
a change batch, a rule change), a document that is big on disk
(:data:`~ingestd.daemon.sync.preparing.preparer.THREADED_PREPARE_BYTES`) or makes more than
:data:`LONG_CHUNKS` chunks is not written by that sync: it becomes a
:class:`LongWrite`, a resumable unit of work the sync hands to :class:`LongWrites` (and
lists in ``SyncResult.background``). The daemon then runs one :meth:`LongWrites.step`
at a time: at the top of its queue, and at the checkpoints of other long work. A step
is bounded: it polls the chunking of the file in a worker thread, or writes one slice
(at most :data:`STEP_CHUNKS` chunks, one model call of about a second, or one call of
an embedding server filled with the chunks of the next slices), or finishes the
document. Between two steps the daemon answers searches and writes other files'
changes, so a small edit waits for at most one slice.

The units are written one after the other (first come, first served). The write
order of a unit is the writer's (DESIGN.md point 5): each slice records its ids as
pending, then upserts them with the pending marker (searches skip them); the last step
deletes the stale ids, removes the marker and commits. A stop between steps leaves only
pending ids the manifest knows: the next start writes the document again from its
cached vectors.

A unit owns its document. A later sync that finds the document unchanged (same
content hash and rule) leaves it to the unit; one that finds it changed, deleted or
reverted supersedes the unit (:meth:`LongWrites.cancel`): nothing more of it is
written, and the next write of the document deletes what it wrote. A sync that must
be complete when it returns (``resync``, repairs) takes the document over the same way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ingestd.daemon.sync.context import CollectionLifecycle, SyncContext
from ingestd.daemon.sync.preparing.documents import PreparedDocument
from ingestd.daemon.sync.preparing.preparer import Preparer
from ingestd.daemon.sync.types import SyncResult, UnreadableFile
from ingestd.daemon.sync.writing.write_parts import (
    DocWork,
    InFlight,
    embedded,
    embedded_texts,
    fails_whole_batch,
)
from ingestd.daemon.sync.writing.writer import Writer

__all__ = ["LONG_CHUNKS", "POLL_S", "STEP_CHUNKS", "LongWrite", "LongWrites", "wait_all"]

logger = logging.getLogger(__name__)

#: Documents with more chunks than this are written in the background.
LONG_CHUNKS = 64
#: Most chunks embedded and upserted per background step: one model call of the default
#: ``embedding.batch_size``, fewer when the machine is slow (the embedder sizes its calls
#: to about a second), so that an edit of another file waits for about a second (the
#: writer's slices are ``SLICE_CHUNKS``).
STEP_CHUNKS = 16
#: Seconds between two polls of a document being chunked in a worker thread.
POLL_S = 0.2


@dataclass
class LongWrite:
    """A long document being written in the background.

    Attributes:
        source: the source name.
        path: POSIX path relative to the source root.
        size: the file's size when planned, in bytes.
        content_hash: sha256 of the bytes it writes, when known (``None``: not read yet).
        rule_fingerprint: the fingerprint of the rule that chunks it.
        git_commit: HEAD's commit of a git source.
        first: monotonic time of the oldest change it carries (``None`` for a scan):
            it counts in ``lag_seconds`` until its write begins.
        last_sync: the sync that made it was complete otherwise: once no unit of the
            source is left, the source's last sync is recorded.
        prep: the prepared document, once chunked.
        work: its part of the write, once begun.
        done: fresh rows upserted so far.
        result: its counts (``indexed``, ``chunks_written``, ...).
    """

    source: str
    path: str
    size: int
    content_hash: str | None
    rule_fingerprint: str
    git_commit: str | None = None
    first: float | None = None
    last_sync: bool = False
    prep: PreparedDocument | None = None
    work: DocWork | None = None
    done: int = 0
    result: SyncResult = field(init=False)
    _thread: threading.Thread | None = None
    _box: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.result = SyncResult(self.source)

    @property
    def started(self) -> bool:
        """Whether its write has begun (it is being chunked or written)."""
        return self._thread is not None or self.work is not None


class LongWrites:
    """The long documents waiting or being written, in order (see the module docstring).

    Args:
        ctx: the engine's context.
        preparer: chunks a document (in a worker thread).
        writer: writes slices (its ``in_flight`` shows the unit being written).
        collections: a migration's build follows each document written.

    Attributes:
        enabled: documents are handed off only when set (the daemon sets it; a
            one-shot command writes everything itself).
        on_done: called with ``(result, first)`` when a unit is written.
    """

    def __init__(
        self,
        ctx: SyncContext,
        preparer: Preparer,
        writer: Writer,
        collections: CollectionLifecycle,
    ) -> None:
        self.ctx = ctx
        self.preparer = preparer
        self.writer = writer
        self.collections = collections
        self.enabled = False
        self.on_done: Callable[[SyncResult, float | None], None] | None = None
        self._units: dict[tuple[str, str], LongWrite] = {}
        self._stepping = False

    # -- the units -----------------------------------------------------------------------

    def get(self, source: str, path: str) -> LongWrite | None:
        """The unit that owns document ``(source, path)``, if any."""
        return self._units.get((source, path))

    def paths(self, source: str) -> set[str]:
        """Paths of ``source`` owned by units."""
        return {p for s, p in self._units if s == source}

    def pending(self) -> bool:
        """Whether any unit is left."""
        return bool(self._units)

    def waiting(self) -> list[float]:
        """First-change times of the units whose write has not begun (``lag_seconds``)."""
        units = list(self._units.values())  # read by status off the engine thread
        return [u.first for u in units if u.first is not None and not u.started]

    def units(self) -> list[LongWrite]:
        """Every unit, the one being written first."""
        return list(self._units.values())

    def add(self, unit: LongWrite) -> None:
        """Queue ``unit`` (a unit it supersedes keeps its place in the queue)."""
        key = (unit.source, unit.path)
        old = self._units.get(key)
        if old is not None:
            self._drop(old)
        self._units[key] = unit
        self.writer.in_flight[key] = InFlight(unit.source, unit.path, 0, 0, unit.size, "queued")

    def note_first(self, source: str, paths: list[str], first: float) -> None:
        """The units of ``paths`` carry a change made at monotonic time ``first``."""
        for p in paths:
            u = self._units.get((source, p))
            if u is not None and (u.first is None or first < u.first):
                u.first = first

    def cancel(self, source: str, path: str) -> bool:
        """Supersede the unit of ``(source, path)``; returns whether there was one.

        Nothing more of it is written; what it wrote stays pending in the manifest, and
        the next write (or the deletion) of the document removes it.
        """
        u = self._units.pop((source, path), None)
        if u is None:
            return False
        self._drop(u)
        logger.debug("the background write of %s is superseded", path)
        return True

    def _drop(self, u: LongWrite) -> None:
        self.writer.in_flight.pop((u.source, u.path), None)
        u._box.append(None)  # a chunking thread's result is not used

    # -- stepping ------------------------------------------------------------------------

    def step(self) -> float | None:
        """Do one bounded step of the first unit.

        Returns:
            Seconds to wait before the next step (0: at once), or ``None`` when no unit
            is left.
        """
        if self._stepping:  # a checkpoint inside a step (a migration build): not again
            return 0.0
        self._stepping = True
        try:
            if not self._units:
                return None
            u = next(iter(self._units.values()))
            if u.prep is None and not self._chunked(u):
                return POLL_S if (u.source, u.path) in self._units else 0.0
            try:
                if u.work is None:
                    self._begin(u)
                elif u.done < len(u.work.fresh):
                    self._slice(u)
                else:
                    self._finish(u)
            except Exception as exc:
                if fails_whole_batch(exc):
                    raise  # the step is tried again after a back-off
                self._failed(u, exc)
            return 0.0 if self._units else None
        finally:
            self._stepping = False

    def _failed(self, u: LongWrite, exc: Exception) -> None:
        """The document's own write failed: it is committed as failed (no points)."""
        assert u.prep is not None
        p = u.prep
        error = f"{type(exc).__name__}: {exc}"
        logger.error("cannot write %s (%s); recording it as failed", u.path, error)
        self._done(u, report=False)
        failed = PreparedDocument(
            p.path, p.stat, p.content_hash, p.rule, error=f"cannot be written: {error}"
        )
        self.writer.write(u.source, [failed], u.result)
        self.ctx.manifest.set_last_change_synced(u.source, self.ctx.now())
        if self.on_done is not None:
            self.on_done(u.result, u.first)

    def _chunked(self, u: LongWrite) -> bool:
        """Start or poll the chunking of ``u`` in a worker thread; ``True`` once done."""
        if u._thread is None:
            self.writer.in_flight[(u.source, u.path)].phase = "chunking"
            box = u._box

            def work() -> None:
                try:
                    box.append(self.preparer.prepare(u.source, u.path, u.git_commit))
                except BaseException as exc:  # re-raised on the engine thread
                    box.append(exc)

            u._thread = threading.Thread(target=work, name="ingestd-prepare", daemon=True)
            u._thread.start()
            return False
        if not u._box:
            return False
        result = u._box[0]
        if isinstance(result, UnreadableFile):
            self.ctx.failures.unreadable(u.source, u.path, str(result))
            u.result.retry.append(u.path)
            self._done(u)
            return False
        if isinstance(result, BaseException):
            self._done(u)
            raise result
        assert isinstance(result, PreparedDocument)
        self.ctx.failures.readable(u.source, u.path)
        u.prep = result
        u.content_hash = result.content_hash
        return True

    def _begin(self, u: LongWrite) -> None:
        assert u.prep is not None
        collection = self.ctx.collection_of(u.source)
        (u.work,) = self.writer.begin(u.source, [u.prep])
        flying = self.writer.in_flight[(u.source, u.path)]
        flying.phase = "writing"
        self.writer.refresh_kept(u.source, collection, [u.work], None)
        flying.chunks_total = len(u.work.fresh)

    def _slice(self, u: LongWrite) -> None:
        from ingestd.daemon.sync.writing import writer as writer_mod

        assert u.work is not None
        collection = self.ctx.collection_of(u.source)
        per_call = self.ctx.profiles.profile_of(collection).embedder.texts_per_call
        n = min(writer_mod.SLICE_CHUNKS, STEP_CHUNKS, per_call or STEP_CHUNKS)
        part = [(u.work, r) for r in u.work.fresh[u.done : u.done + n]]
        later = [embedded(u.work.prep, r.ordinal) for r in u.work.fresh[u.done + n :]]
        following = (
            v.prep
            for v in self._units.values()
            if v is not u and v.prep is not None and self.ctx.collection_of(v.source) == collection
        )
        nxt = next(following, None)  # the next unit already chunked: its texts fill the call
        later += embedded_texts([nxt] if nxt is not None else [])
        stats = self.ctx.profiles.stats
        e0, r0 = stats.embedded, stats.reused
        self.writer.upsert_slice(u.source, collection, part, u.result, later)
        u.result.embedded += stats.embedded - e0
        u.result.reused += stats.reused - r0
        u.done += len(part)

    def _finish(self, u: LongWrite) -> None:
        assert u.work is not None
        collection = self.ctx.collection_of(u.source)
        self.writer.finish(collection, [u.work], u.result)
        self.collections.follow(collection, u.source, [u.path], [])
        self._done(u)
        now = self.ctx.now()
        self.ctx.manifest.set_last_change_synced(u.source, now)  # it became searchable
        if u.last_sync and not self.paths(u.source):
            self.ctx.manifest.set_last_sync(u.source, now)
        logger.info(
            "source %s: %s written (%d chunks, %d embedded)",
            u.source,
            u.path,
            u.result.chunks_written,
            u.result.embedded,
        )

    def _done(self, u: LongWrite, *, report: bool = True) -> None:
        key = (u.source, u.path)
        if self._units.get(key) is u:
            del self._units[key]
            self.writer.in_flight.pop(key, None)
        if report and self.on_done is not None:
            self.on_done(u.result, u.first)


def wait_all(units: LongWrites, timeout: float = 600.0) -> None:
    """Step every unit to its end (tests and one-shot use), polling chunking threads."""
    deadline = time.monotonic() + timeout
    while (delay := units.step()) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError("long documents still being written")
        if delay:
            time.sleep(delay)
