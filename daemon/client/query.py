"""The query side of ``ingestd search``, for applications that query Qdrant themselves.

An application that reads a Qdrant server (the scale-out path) reproduces ``ingestd
search`` with three things only ingestd knows: the dense query vector, embedded by
the model and backend that made the collection's vectors; the BM25 query vector, from
ingestd's tokeniser (:func:`ingestd.store.search.sparse.query_vector`); and the rankings and
their fusion (``search.candidates`` points of each ranking, the filters inside each,
equal scores ordered by point id, reciprocal rank fusion with ``search.rrf_k``:
:mod:`ingestd.store.search.fusion`). :class:`QueryBuilder` makes them; ``qdrant_client``
sends them, so the store must be one qdrant-client opens: a Qdrant server, or a
local-mode store (``qdrant.engine: local``), never the default embedded Qdrant Edge
store (``Client.search`` ranks the same on any store). qdrant-client is the
``qdrant-client`` extra (``pip install 'ingestd[qdrant-client]'``)::

    from qdrant_client import QdrantClient
    from ingestd.daemon.client import QueryBuilder

    qb = QueryBuilder.from_state_dir("/var/lib/ingestd")     # the recorded model
    client = QdrantClient(url="http://qdrant:6333")
    hits = qb.search(client, "how do I configure the exporter", k=5, path="docs/collector")

:meth:`QueryBuilder.search` ranks exactly as ``ingestd search`` for one collection
(ingestd merges the rankings of several collections by score, then id).
:meth:`QueryBuilder.request` is the same search as ONE Query API request fused by
Qdrant, for applications that send requests themselves: the same points ranked the
same up to the order of equal scores, which Qdrant leaves to its hashing (and through
which, in ``hybrid``, a tie inside a prefetch can reach the fused scores). A
collection written before hybrid search has no sparse vectors until its next sync;
``ingestd search`` searches it dense only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingestd.daemon.config import Config
    from ingestd.store.search.fusion import Fusion
    from ingestd.store.search.query import Hit, Mode
    from ingestd.store.search.request import SearchRequest
    from ingestd.store.search.sparse import SparseVec

__all__ = ["QueryBuilder"]

#: An embedding callable: texts -> ``(n, dim)`` float32 unit vectors.
EmbedFn = Callable[[Sequence[str]], Any]


class QueryBuilder:
    """Dense and BM25 query vectors and the Query API request of ``ingestd search``.

    Args:
        collection: the collection (the alias ingestd writes, ``ingestd`` by default).
        model: the embedding model's name or folder (as in the config).
        backend: ``torch``, ``onnx`` or ``onnx-int8``.
        fingerprint: the model fingerprint the collection records: when given, a model
            whose files differ is refused (its vectors would not be comparable).
        mode: the default ranking, ``hybrid``, ``dense`` or ``sparse``.
        rrf_k: the RRF constant (config ``search.rrf_k``).
        candidates: points each ranking gives the fusion (config ``search.candidates``).
        fusion: how ``hybrid`` fuses, ``union`` or ``rrf`` (config ``search.fusion``;
            :meth:`request` is plain RRF in Qdrant whatever it says).
        embedding: the config's ``embedding`` section (device, threads, ONNX cache), or
            ``None`` for the defaults.
        embed: an embedding callable to use instead of loading ``model`` (tests).
        endpoint: where a remote backend's model answers
            (:class:`~ingestd.store.embedding.model.Endpoint`; ``None`` for a local one).

    Raises:
        ingestd.store.embedding.embedder.ModelNotFoundError: the model is not installed here.
        ValueError: the model's fingerprint differs from ``fingerprint``, or an unknown
            mode.
    """

    def __init__(
        self,
        collection: str = "ingestd",
        *,
        model: str = "all-MiniLM-L6-v2",
        backend: str = "torch",
        fingerprint: str | None = None,
        mode: str = "hybrid",
        rrf_k: int = 60,
        candidates: int = 50,
        fusion: str = "union",
        embedding: Any = None,
        embed: EmbedFn | None = None,
        endpoint: Any = None,
    ) -> None:
        from ingestd.store.embedding.embedder import model_info
        from ingestd.store.search.fusion import FUSIONS
        from ingestd.store.search.query import MODES

        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}; expected one of: {', '.join(MODES)}")
        self.collection = collection
        self.mode = mode
        self.rrf_k = rrf_k
        self.candidates = candidates
        if fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {fusion!r}; expected one of: {', '.join(FUSIONS)}")
        self.fusion: Fusion = fusion
        self.model = model_info(
            model, backend, endpoint=endpoint, prompts=getattr(embedding, "prompts", None)
        )
        if fingerprint is not None and self.model.fingerprint != fingerprint:
            raise ValueError(
                f"the model {self.model.label} here (fingerprint {self.model.fingerprint[:12]}) "
                f"is not the one that made collection {collection} (fingerprint "
                f"{fingerprint[:12]}): its query vectors would not match the collection's"
            )
        self._embedding = embedding
        self._embed = embed

    @classmethod
    def from_config(
        cls, config: str | Path | Config | None = None, *, collection: str | None = None
    ) -> QueryBuilder:
        """The builder of a config file's (or loaded config's) model and search settings.

        ``collection``: default the collection of the config's sources (``ingestd``).

        Raises:
            ingestd.daemon.config.ConfigError: the config file is invalid.
            ValueError: the config's sources use several collections and none was named.
        """
        from ingestd.daemon.config import Config, load_config

        cfg = config if isinstance(config, Config) else load_config(config)
        if collection is None:
            names = sorted({s.collection for s in cfg.sources}) or ["ingestd"]
            if len(names) > 1:
                raise ValueError(f"the config has several collections ({', '.join(names)})")
            collection = names[0]
        return cls(
            collection,
            model=cfg.embedding.model,
            backend=cfg.embedding.backend,
            mode=cfg.search.mode,
            rrf_k=cfg.search.rrf_k,
            candidates=cfg.search.candidates,
            fusion=cfg.search.fusion,
            embedding=cfg.embedding,
            endpoint=cfg.embedding.endpoint,
        )

    @classmethod
    def from_state_dir(
        cls,
        state_dir: str | Path,
        *,
        collection: str = "ingestd",
        config: str | Path | None = None,
    ) -> QueryBuilder:
        """The builder of the profile a state dir's manifest records for ``collection``.

        The model and backend are those that made the collection's current version
        (during a migration, the version searches read); the ranking settings come
        from ``config`` (default: the defaults).

        Raises:
            ValueError: the manifest records no such collection, or nothing.
        """
        from ingestd.daemon.statedir import StatePaths
        from ingestd.store.manifest.view import ManifestView

        path = StatePaths(Path(state_dir)).manifest
        if not path.is_file():
            raise ValueError(f"nothing indexed in {state_dir} (no {path.name})")
        with ManifestView(path) as m:
            rec = m.collection_record(collection)
        if rec is None:
            raise ValueError(f"no collection {collection!r} is recorded in {state_dir}")
        settings = rec.get("settings") or {"model": rec["model"]}
        emb = dict(settings.get("embedding") or {})
        for key in ("query_prompt", "document_prompt"):  # not recorded: the model got none
            emb.setdefault(key, "")
        for key in ("query_input_type", "document_input_type"):  # not recorded: none said
            emb.setdefault(key, None)
        base = cls.from_config(config, collection=collection)
        embedding = base._embedding
        if embedding is not None:  # a remote model: where it answers is recorded too
            fields = type(embedding).model_fields
            embedding = embedding.model_copy(
                update={k: v for k, v in emb.items() if k in fields and k != "model"}
            )
        return cls(
            collection,
            model=str(emb.get("model") or settings["model"]),
            backend=str(emb.get("backend") or "torch"),
            fingerprint=str(rec["model_fingerprint"]),
            mode=base.mode,
            rrf_k=base.rrf_k,
            candidates=base.candidates,
            fusion=base.fusion,
            embedding=embedding,
            endpoint=getattr(embedding, "endpoint", None),
        )

    # -- the vectors ------------------------------------------------------------------------------

    def _model(self) -> EmbedFn:
        if self._embed is None:
            from ingestd.store.embedding.embedder import load_embedder

            e = self._embedding
            self._embed = load_embedder(
                self.model,
                device=getattr(e, "device", "cpu"),
                batch_size=getattr(e, "batch_size", 16),
                threads=getattr(e, "threads", None),
                cache_dir=getattr(e, "cache_dir", None),
            )
        return self._embed

    def dense(self, query: str) -> list[float]:
        """The query's embedding by the collection's model, its query prompt first."""
        from ingestd.store.embedding.prompts import embed_queries

        return [float(x) for x in embed_queries(self._model(), self.model, [query])[0]]

    def sparse(self, query: str) -> Any:
        """The query's BM25 vector as a ``qdrant_client.models.SparseVector``."""
        from qdrant_client import models

        from ingestd.store.search.sparse import query_vector

        vec = query_vector(query)
        return models.SparseVector(indices=list(vec.indices), values=list(vec.values))

    def filter(
        self, *, source: str | None = None, path: str | None = None, version: str | None = None
    ) -> Any:
        """The ``qdrant_client.models.Filter`` of ``ingestd search --source/--path/--version``.

        Parent sections (``hierarchical`` rules) are never hits; ``version`` keeps the
        points of that version of a versioned source (a git branch or tag name).
        """
        from ingestd.store.search.query import Filters

        return Filters(source=source, path=path, version=version).qdrant()

    def _request(
        self, query: str, k: int, mode: str | None, source: str | None, path: str | None,
        version: str | None,
    ) -> SearchRequest:  # fmt: skip
        """The :class:`~ingestd.store.search.request.SearchRequest` of the arguments."""
        from ingestd.store.search.query import Filters
        from ingestd.store.search.request import SearchRequest

        filters = Filters(source=source, path=path, version=version)
        return SearchRequest(query, k, mode, filters)  # type: ignore[arg-type]

    def _parts(
        self, request: SearchRequest
    ) -> tuple[Mode, list[float] | None, SparseVec | None, Any]:
        """The mode (default: the builder's), the query's vectors it needs, the filter.

        Raises:
            ValueError: an unknown mode.
        """
        from ingestd.store.search.sparse import query_vector

        mode = request.checked_mode(self.mode)
        dense = self.dense(request.query) if mode != "sparse" else None
        sparse = query_vector(request.query) if mode != "dense" else None
        return mode, dense, sparse, request.filters.qdrant()

    def request(
        self,
        query: str,
        *,
        k: int = 5,
        mode: str | None = None,
        source: str | None = None,
        path: str | None = None,
        version: str | None = None,
        with_payload: bool = True,
    ) -> Any:
        """``ingestd search QUERY`` as ONE ``qdrant_client.models.QueryRequest``.

        Qdrant fuses it: the ranking of :meth:`search` up to the order of equal
        scores (see the module's notes).

        Args:
            query: the question.
            k: number of hits.
            mode: ``hybrid``, ``dense`` or ``sparse`` (default: the builder's); only
                ``dense`` and ``hybrid`` embed the query.
            source: only this source.
            path: only this file, or the files under this folder.
            version: only this version of a versioned source (a git branch or tag
                name, as hits' ``version`` gives it).
            with_payload: ask for the payload (``text``, ``path``, ``start_line``, ...).

        Send it with ``client.query_batch_points(builder.collection, requests=[req])``.

        Raises:
            ValueError: an unknown mode.
        """
        from ingestd.store.search.query import request

        search = self._request(query, k, mode, source, path, version)
        mode_, dense, sparse, flt = self._parts(search)
        req = request(
            mode_,
            dense,
            sparse,
            search.k,
            flt,
            rrf_k=self.rrf_k,
            candidates=self.candidates,
        )
        return req.model_copy(update={"with_payload": with_payload})

    def search(
        self,
        client: Any,
        query: str,
        *,
        k: int = 5,
        mode: str | None = None,
        source: str | None = None,
        path: str | None = None,
        version: str | None = None,
    ) -> list[Hit]:
        """``ingestd search QUERY`` through ``client`` (a ``QdrantClient``): hits, best first.

        The arguments are :meth:`request`'s. The rankings go in one
        ``query_batch_points`` call (another when a ranking's cut falls inside a tie),
        fused as ``ingestd search`` fuses them, then the payloads of the hits in one
        ``retrieve`` call: the same hits in the same order, equal scores by point id.

        Returns:
            :class:`ingestd.store.search.query.Hit` s: ``id``, ``score``, ``payload``,
            ``rank`` (1-based).

        Raises:
            ValueError: an unknown mode.
        """
        from ingestd.store.search.fusion import available, rank_and_fuse
        from ingestd.store.search.query import client_rankings, client_scores, payloads_by_id

        search = self._request(query, k, mode, source, path, version)
        mode_, dense, sparse, flt = self._parts(search)
        batch = lambda reqs: client.query_batch_points(self.collection, requests=reqs)  # noqa: E731
        fetch = client_rankings(batch, dense, sparse, flt)
        payloads = payloads_by_id(lambda ids: client.retrieve(self.collection, ids=ids))
        return rank_and_fuse(
            fetch,
            payloads,
            mode_,
            available(dense, sparse),
            limit=search.k,
            candidates=self.candidates,
            rrf_k=self.rrf_k,
            ranks=False,
            score=client_scores(batch, dense, sparse, flt),
            fusion=self.fusion,
        )
