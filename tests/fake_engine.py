"""A third embedded engine, for tests only: proof that an engine is one module plus one entry.

``memory`` keeps its collections in Python dicts, scores every point in Python (cosine;
BM25 with the IDF Qdrant's ``Modifier.IDF`` uses) and writes its folder
(``<state dir>/memory``: ``memory.json`` with the aliases, one
``collections/<physical>/points.json`` per collection) when it is closed. Its filter
translation is the neutral conditions read in Python. Its updates are not durable (a
crash loses what was not saved), so it proves a clean close from its files, as Qdrant
Edge does (``points.json``'s size and modification time). Nothing else in ingestd knows it:
the ``memory_engine`` fixture (``tests/conftest.py``) adds ``memory`` to the engines'
table, ``ENGINES["memory"] = "tests.fake_engine:SPEC"``, and removes it afterwards.

:class:`OtherServer` is a second server engine, proof that a server's name comes from
its spec (``tests/store/vectors/test_engines.py`` puts it in the table).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestd.store.common.damage import StateDamagedError
from ingestd.store.search.conditions import Conditions
from ingestd.store.search.fusion import Fusion, available, rank_and_fuse
from ingestd.store.search.query import (
    MODES,
    PENDING_KEY,
    Filters,
    Hit,
    Mode,
    Ranking,
    payloads_by_id,
    scored_hits,
)
from ingestd.store.search.sparse import SparseVec
from ingestd.store.vectors.base import (
    DenseVector,
    Layout,
    Point,
    ensure_collection,
    version_of,
)
from ingestd.store.vectors.client.server_engine import ServerEngine
from ingestd.store.vectors.routing import RoutedWrites
from ingestd.store.vectors.spec import STORE_PART, EngineSpec, StoreSettings, json_damage

__all__ = ["OTHER_SERVER", "SPEC", "MemoryEngine", "MemoryStore", "OtherServer"]

MARKER = "memory.json"
COLLECTIONS = "collections"
POINTS = "points.json"


def payload_filter(conditions: Conditions | None) -> Callable[[Mapping[str, Any]], bool]:
    """This engine's filter: the neutral conditions, read in Python."""
    return (lambda _p: True) if conditions is None else conditions.accepts


@dataclass
class _Record:
    id: str
    vector: list[float]
    payload: dict[str, Any]
    sparse: SparseVec | None


@dataclass
class _Collection:
    dim: int
    points: dict[str, _Record] = field(default_factory=dict)


@dataclass
class _Scored:
    id: str
    score: float
    payload: dict[str, Any] | None


def _sparse_row(sv: SparseVec | None) -> list[list[Any]] | None:
    return [list(sv.indices), list(sv.values)] if sv is not None else None


def _unit(vec: DenseVector) -> list[float]:
    values = [float(x) for x in vec]
    norm = math.sqrt(sum(x * x for x in values)) or 1.0
    return [x / norm for x in values]


class MemoryStore(RoutedWrites):
    """A :class:`~ingestd.store.vectors.base.VectorStore` held in memory, saved on close.

    Args:
        path: its folder (created when missing).

    Raises:
        StateDamagedError: a file of the folder does not parse.
    """

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        super().__init__()
        self.engine = SPEC.name
        self.path = Path(path)
        self.read_only = read_only
        if not read_only:
            self.path.mkdir(parents=True, exist_ok=True)
        self._aliases: dict[str, str] = {}
        self._colls: dict[str, _Collection] = {}
        self._load()

    # -- files -----------------------------------------------------------------------------

    def _read(self, file: Path) -> Any:
        try:
            return json.loads(file.read_text())
        except ValueError as exc:
            raise StateDamagedError(file, STORE_PART, f"{type(exc).__name__}: {exc}") from None

    def _load(self) -> None:
        marker = self.path / MARKER
        if not marker.exists():
            return
        meta = self._read(marker)
        self._aliases = dict(meta["aliases"])
        for physical, dim in meta["collections"].items():
            coll = _Collection(int(dim))
            for pid, (vec, payload, sparse) in self._read(self._points_file(physical)).items():
                sv = SparseVec(list(sparse[0]), list(sparse[1])) if sparse else None
                coll.points[pid] = _Record(pid, vec, payload, sv)
            self._colls[physical] = coll

    def _points_file(self, physical: str) -> Path:
        return self.path / COLLECTIONS / physical / POINTS

    def close(self) -> None:
        """Write every collection and the aliases to the folder (a reader's: nothing)."""
        if self.read_only:
            return
        for physical, coll in self._colls.items():
            file = self._points_file(physical)
            file.parent.mkdir(parents=True, exist_ok=True)
            rows = {
                pid: [r.vector, r.payload, _sparse_row(r.sparse)] for pid, r in coll.points.items()
            }
            file.write_text(json.dumps(rows))
        meta = {
            "aliases": self._aliases,
            "collections": {p: c.dim for p, c in self._colls.items()},
        }
        (self.path / MARKER).write_text(json.dumps(meta))

    # -- collections -----------------------------------------------------------------------

    def _physical(self, name: str) -> str | None:
        physical = self._aliases.get(name, name)
        return physical if physical in self._colls else None

    def _coll(self, name: str) -> _Collection:
        physical = self._physical(name)
        if physical is None:
            raise KeyError(f"collection {name!r} not found")
        return self._colls[physical]

    def layout(self, name: str) -> Layout:
        physical = self._physical(name)
        if physical is None:
            return Layout(name, None)
        dim = self._colls[physical].dim
        return Layout(name, physical, name in self._aliases, True, dim, self.engine)

    def has_collection(self, name: str) -> bool:
        return self._physical(name) is not None

    def collections(self) -> list[str]:
        return sorted(self._colls)

    def aliases(self) -> dict[str, str]:
        return dict(self._aliases)

    def versions(self, name: str) -> dict[int, str]:
        out = {}
        for physical in self._colls:
            version = version_of(physical, name)
            if version is not None:
                out[version] = physical
        return out

    def ensure_collection(self, name: str, dim: int) -> Layout:
        return ensure_collection(self, name, dim)

    def create_physical(self, physical: str, dim: int) -> None:
        self._colls.setdefault(physical, _Collection(dim))

    def point_alias(self, name: str, physical: str) -> None:
        self._aliases[name] = physical

    def drop_collection(self, name: str) -> None:
        self._colls.pop(name, None)
        self._aliases = {a: p for a, p in self._aliases.items() if p != name}
        shutil.rmtree(self.path / COLLECTIONS / name, ignore_errors=True)

    # -- writes ----------------------------------------------------------------------------

    def _target(self, collection: str) -> _Collection:
        return self._coll(self.write_target(collection))

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        coll = self._target(collection)
        for p in points:
            coll.points[p.id] = _Record(p.id, _unit(p.vector), dict(p.payload), p.sparse)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        coll = self._target(collection)
        for pid in ids:
            coll.points.pop(pid, None)

    def set_payload(
        self, collection: str, updates: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[str]:
        coll = self._target(collection)
        missing = []
        for pid, payload in updates:
            if pid in coll.points:
                coll.points[pid].payload.update(payload)
            else:
                missing.append(pid)
        return missing

    def set_sparse(self, collection: str, updates: Sequence[tuple[str, SparseVec]]) -> None:
        coll = self._target(collection)
        for pid, vec in updates:
            if pid in coll.points:
                coll.points[pid].sparse = vec

    def unmark_pending(self, collection: str, ids: Sequence[str]) -> None:
        coll = self._target(collection)
        for pid in ids:
            if pid in coll.points:
                coll.points[pid].payload.pop(PENDING_KEY, None)

    # -- reads -----------------------------------------------------------------------------

    def _records(self, collection: str, ids: Sequence[str]) -> list[_Record]:
        physical = self._physical(collection)
        if physical is None:
            return []
        points = self._colls[physical].points
        return [points[pid] for pid in ids if pid in points]

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[tuple[str, dict[str, Any], DenseVector | None]]:
        return [
            (r.id, dict(r.payload), list(r.vector) if with_vectors else None)
            for r in self._records(collection, ids)
        ]

    def retrieve_points(self, collection: str, ids: Sequence[str]) -> list[Point]:
        return [
            Point(r.id, list(r.vector), dict(r.payload), r.sparse)
            for r in self._records(collection, ids)
        ]

    def existing(self, collection: str, ids: Sequence[str]) -> set[str]:
        return {r.id for r in self._records(collection, ids)}

    def sparse_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, SparseVec | None]:
        return {r.id: r.sparse for r in self._records(collection, ids)}

    def _matching(self, collection: str, conditions: Conditions | None) -> list[_Record]:
        physical = self._physical(collection)
        if physical is None:
            return []
        accepts = payload_filter(conditions)
        points = self._colls[physical].points
        return [points[pid] for pid in sorted(points) if accepts(points[pid].payload)]

    def scroll(
        self, collection: str, source: str | None = None, keys: Sequence[str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        for r in self._matching(collection, Conditions.of_source(source)):
            payload = dict(r.payload)
            if keys is not None:
                payload = {k: v for k, v in payload.items() if k in keys}
            yield r.id, payload

    def point_ids(self, collection: str) -> Iterator[str]:
        for r in self._matching(collection, None):
            yield r.id

    def point_count(self, collection: str, sources: Sequence[str] | None = None) -> int:
        return len(self._matching(collection, Conditions.of_sources(sources)))

    def search(
        self,
        collection: str,
        *,
        dense: Sequence[float] | None,
        sparse: SparseVec | None,
        limit: int,
        filters: Filters | None = None,
        mode: Mode = "hybrid",
        rrf_k: int = 60,
        candidates: int = 50,
        ranks: bool = False,
        fusion: Fusion = "union",
    ) -> list[Hit]:
        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}; expected one of {MODES}")
        coll = self._coll(collection)
        found = self._matching(collection, (filters or Filters()).conditions())
        scores = {
            "dense": _dense_scores(found, dense),
            "sparse": _sparse_scores(found, sparse, list(coll.points.values())),
        }

        def fetch(wanted: Sequence[tuple[Ranking, int]], with_payload: bool) -> list[list[Hit]]:
            out = []
            for name, n in wanted:
                best = sorted(scores[name], key=lambda s: (-s[1], s[0].id))[:n]
                rows = [_Scored(r.id, sc, r.payload if with_payload else None) for r, sc in best]
                out.append(scored_hits(rows))
            return out

        def score(wanted: Sequence[tuple[Ranking, Sequence[str]]]) -> list[dict[str, float]]:
            return [
                {r.id: sc for r, sc in scores[name] if r.id in set(ids)} for name, ids in wanted
            ]

        payloads = payloads_by_id(lambda ids: self._records(collection, ids))
        return rank_and_fuse(
            fetch,
            payloads,
            mode,
            available(dense, sparse),
            limit=limit,
            candidates=candidates,
            rrf_k=rrf_k,
            ranks=ranks,
            score=score,
            fusion=fusion,
        )


def _dense_scores(
    found: list[_Record], query: Sequence[float] | None
) -> list[tuple[_Record, float]]:
    if query is None:
        return []
    q = _unit(query)
    return [(r, sum(a * b for a, b in zip(q, r.vector, strict=True))) for r in found]


def _sparse_scores(
    found: list[_Record], query: SparseVec | None, every: list[_Record]
) -> list[tuple[_Record, float]]:
    """BM25 as Qdrant scores it: query weight x point weight x IDF over the collection."""
    if query is None:
        return []
    with_sparse = [r.sparse for r in every if r.sparse is not None]
    df: dict[int, int] = {}
    for sv in with_sparse:
        for i in set(sv.indices):
            df[i] = df.get(i, 0) + 1
    n = len(with_sparse)
    weights = dict(zip(query.indices, query.values, strict=True))
    out = []
    for r in found:
        if r.sparse is None:
            continue
        pairs = zip(r.sparse.indices, r.sparse.values, strict=True)
        shared = [(i, v) for i, v in pairs if i in weights]
        if shared:
            score = sum(
                weights[i] * v * math.log(1 + (n - df[i] + 0.5) / (df[i] + 0.5)) for i, v in shared
            )
            out.append((r, score))
    return out


class MemoryEngine(EngineSpec):
    """The spec of the test-only ``memory`` engine (see the module docstring)."""

    name = "memory"
    folder = "memory"
    collections_dir = COLLECTIONS
    package = "json"
    install_hint = "nothing to install"

    def holds_store(self, path: Path) -> bool:
        return (path / MARKER).is_file()

    def holds_collections(self, path: Path) -> bool:
        return self.holds_store(path) and any((path / COLLECTIONS).glob("*"))

    def installed(self) -> bool:
        return True

    def open(self, path: Path, *, read_only: bool = False) -> MemoryStore:
        return MemoryStore(path, read_only=read_only)

    def physical_of(self, path: Path, name: str) -> str | None:
        try:
            meta = json.loads((path / MARKER).read_text())
        except (OSError, ValueError):
            return None
        physical = str(meta["aliases"].get(name, name))
        return physical if physical in meta["collections"] else None

    def proof(self, path: Path, physical: str) -> dict[str, Any] | None:
        try:
            st = (path / COLLECTIONS / physical / POINTS).stat()
        except OSError:
            return None
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}

    def proof_change(self, path: Path, physical: str, proof: Mapping[str, Any]) -> str | None:
        now = self.proof(path, physical)
        return None if now == dict(proof) else f"{POINTS} changed"

    def files_damage(self, path: Path) -> StateDamagedError | None:
        for file in (path / MARKER, *sorted(path.glob(f"{COLLECTIONS}/*/{POINTS}"))):
            damage = json_damage(file)
            if damage is not None:
                return damage
        return None

    def deep_damage(self, path: Path) -> StateDamagedError | None:
        try:
            MemoryStore(path)
        except StateDamagedError as exc:
            return exc
        return None

    def filter(self, conditions: Conditions | None) -> Callable[[Mapping[str, Any]], bool]:
        return payload_filter(conditions)


#: The spec the engines' table names (``tests.fake_engine:SPEC``).
SPEC = MemoryEngine()


class OtherServer(ServerEngine):
    """A second server engine, for tests only: a Qdrant server reached by a URL ending ``/other``.

    Registered before ``server`` in the engines' table (the first engine whose spec
    selects the settings is theirs), it shows that a server engine's name comes from its
    spec alone: its stores report it as their engine.
    """

    name = "other-server"

    def selected(self, settings: StoreSettings) -> bool:
        """Whether ``settings`` name a URL whose path ends with ``/other``."""
        return bool(settings.url) and str(settings.url).rstrip("/").endswith("/other")


#: The second server's spec (``tests.fake_engine:OTHER_SERVER``).
OTHER_SERVER = OtherServer()
