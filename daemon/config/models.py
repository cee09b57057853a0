"""The configuration's pydantic models: every key of the YAML file, with its default.

Every model is frozen and rejects unknown keys (``config.example.yaml`` explains each).
The ``embedding`` section is :mod:`ingestd.daemon.config.embedding`'s; the base class,
the error and its wording are :mod:`ingestd.daemon.config.base`'s (all re-exported).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from ingestd.daemon.config.base import (
    ConfigError,
    ConfigModel,
    carried_errors,
    did_you_mean,
    http_url_problem,
    not_one_of,
    spelled,
)
from ingestd.daemon.config.embedding import REMOTE_BACKENDS, EmbeddingConfig, default_backend
from ingestd.daemon.sources.kinds import DEFAULT_KIND, SOURCE_KINDS, config_model
from ingestd.daemon.statedir import StatePaths

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_INCLUDE",
    "Config",
    "ConfigError",
    "EmbeddingConfig",
    "FilesConfig",
    "KindedSource",
    "ManifestConfig",
    "MassDeleteConfig",
    "MetricsConfig",
    "QdrantConfig",
    "REMOTE_BACKENDS",
    "RuleConfig",
    "SearchConfig",
    "SourceConfig",
    "WatchConfig",
    "default_backend",
    "default_rules",
]

#: Files a source indexes when its config says nothing (gitignore-style globs).
DEFAULT_INCLUDE: tuple[str, ...] = (
    "*.md", "*.markdown", "*.mdx", "*.rst", "*.txt",
    "*.ipynb", "*.html", "*.htm", "*.pdf", "*.adoc", "*.asciidoc",
)  # fmt: skip
#: Always excluded besides ``.git`` and the state dir (binary assets are never included).
DEFAULT_EXCLUDE: tuple[str, ...] = ()


class SourceConfig(ConfigModel):
    """What every kind of source's configuration has; each kind's model adds its own keys.

    A source's entry in ``sources`` is validated by the model its ``kind`` names in
    :data:`~ingestd.daemon.sources.kinds.SOURCE_KINDS` (a union tagged by ``kind``:
    ``local``, :class:`~ingestd.daemon.sources.local.LocalSourceConfig`; ``git``,
    :class:`~ingestd.daemon.sources.gitconfig.GitSourceConfig`), so a key of another
    kind is an error that names it.

    Attributes:
        kind: what reads its documents: an entry of
            :data:`~ingestd.daemon.sources.kinds.SOURCE_KINDS` (``local``: a folder).
        name: identity of the source (payload ``source``); default: the canonical
            absolute root path.
        root: the folder; relative paths are relative to the config file.
        include: gitignore-style globs of files to index.
        exclude: gitignore-style globs of files to skip (after ``include``).
        gitignore: honour ``.gitignore`` files in the tree.
        collection: the Qdrant collection of its points.
        has_root: (class) whether the kind's documents are a folder on this machine:
            ``root`` is then required, made absolute and checked against the other
            sources' roots.
        not_read: (class) the keys of this common model that the kind does not read
            (a git source has no ``root``, and no ``.gitignore`` file of its own
            applies): refused by name, as a key of another kind's model is.
    """

    has_root: ClassVar[bool] = True
    not_read: ClassVar[frozenset[str]] = frozenset()

    kind: str = DEFAULT_KIND
    name: str = ""
    root: Path = Path()
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    gitignore: bool = True
    collection: str = "ingestd"

    @model_validator(mode="after")
    def _root_given(self) -> SourceConfig:
        if self.has_root and "root" not in self.model_fields_set:
            raise ValueError("root: Field required")
        return self

    @classmethod
    def keys(cls) -> frozenset[str]:
        """The keys a ``sources`` entry of this kind may have.

        A kind without a folder on this machine (``has_root`` false) never reads
        ``root``, whether or not its ``not_read`` names it.
        """
        unread = cls.not_read if cls.has_root else cls.not_read | {"root"}
        return frozenset(cls.model_fields) - unread

    @field_validator("collection")
    @classmethod
    def _collection(cls, v: str) -> str:
        if not v or "/" in v:
            raise ValueError("must be a non-empty name without '/'")
        return v

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v not in SOURCE_KINDS:
            raise ValueError(
                f"unknown source kind; expected one of: {', '.join(sorted(SOURCE_KINDS))}"
            )
        return v

    def resolved(self, base: Path) -> Self:
        """This source with its paths resolved against ``base`` (the config file's folder).

        The root is made canonical and absolute, and names the source when it has no
        name. A kind with no root on this machine overrides it.
        """
        root = Path(
            os.path.realpath(
                (self.root if self.root.is_absolute() else base / self.root).expanduser()
            )
        )
        return self.model_copy(update={"root": root, "name": self.name or str(root)})


def _of_kind(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One ``sources`` entry, validated by the model of its ``kind`` (the tagged union).

    The union is resolved through the table when a config is read, so a kind added to
    :data:`~ingestd.daemon.sources.kinds.SOURCE_KINDS` is known at once, and an entry
    without ``kind`` is a :data:`~ingestd.daemon.sources.kinds.DEFAULT_KIND` source
    (both beyond pydantic's ``Field(discriminator=...)``). A key that another kind's
    model has (or that this kind's model inherits but does not read) is refused with
    the kind it belongs to; an unknown ``kind`` is the entry's one error, with the
    nearest kind's name (its other keys cannot be judged). An entry that is no mapping
    gets the base model's error.
    """
    if isinstance(value, SourceConfig):
        return value
    kind = value.get("kind", DEFAULT_KIND) if isinstance(value, Mapping) else None
    if not isinstance(value, Mapping) or not isinstance(kind, str):
        return handler(value)
    if kind not in SOURCE_KINDS:
        raise ValidationError.from_exception_data(
            "SourceConfig", [{"type": _unknown_kind(kind), "loc": ("kind",), "input": kind}]
        )
    model = config_model(kind)
    foreign = {key: _kinds_with(key) for key in value if key not in model.keys()}
    foreign = {key: kinds for key, kinds in foreign.items() if kinds}
    if not foreign:
        return model.model_validate(value)
    errors: list[InitErrorDetails] = [
        {
            "type": PydanticCustomError(
                "foreign_key",
                "{key} is a key of {kinds} sources (this source is kind: {kind})",
                {"key": key, "kinds": spelled([f"kind: {k}" for k in kinds]), "kind": kind},
            ),
            "loc": (key,),
            "input": value[key],
        }
        for key, kinds in foreign.items()
    ]
    try:
        model.model_validate({k: v for k, v in value.items() if k not in foreign})
    except ValidationError as exc:  # the entry's other errors, as they were
        errors += carried_errors(exc)
    raise ValidationError.from_exception_data("SourceConfig", errors)


def _kinds_with(key: str) -> list[str]:
    """The kinds whose ``sources`` entries take ``key`` (sorted)."""
    return sorted(k for k in SOURCE_KINDS if key in config_model(k).keys())


def _unknown_kind(kind: str) -> PydanticCustomError:
    hint = did_you_mean(kind, SOURCE_KINDS)
    return PydanticCustomError(
        "unknown_kind",
        "unknown source kind '{kind}'; {hint}expected one of: {expected}",
        {"kind": kind, "hint": hint, "expected": ", ".join(sorted(SOURCE_KINDS))},
    )


#: A ``sources`` entry: a :class:`SourceConfig` of the model its ``kind`` names.
KindedSource = Annotated[SourceConfig, WrapValidator(_of_kind)]


class RuleConfig(ConfigModel):
    """A per-path chunking rule: the first rule whose ``match`` globs match a path wins.

    Attributes:
        name: shown in payloads (``rule``) and ``status``; default: the chunker name
            (suffixed with the rule's index when several rules share a chunker).
        match: gitignore-style globs, relative to the source root.
        chunker: a registered strategy name (``token``, ``sentence``, ``markdown``, ...).
        params: the strategy's options; checked against its own fields.
    """

    name: str | None = None
    match: tuple[str, ...] = Field(min_length=1)
    chunker: str
    params: Mapping[str, Any] = Field(default_factory=dict)


def default_rules() -> tuple[RuleConfig, ...]:
    """The rules used when the config gives none: one strategy per file kind."""
    return (
        RuleConfig(name="markdown", match=("*.md", "*.markdown"), chunker="markdown"),
        RuleConfig(name="mdx", match=("*.mdx",), chunker="mdx"),
        RuleConfig(name="rst", match=("*.rst",), chunker="rst"),
        RuleConfig(name="notebook", match=("*.ipynb",), chunker="notebook"),
        RuleConfig(name="html", match=("*.html", "*.htm"), chunker="html"),
        RuleConfig(name="pdf", match=("*.pdf",), chunker="pdf"),
        RuleConfig(name="asciidoc", match=("*.adoc", "*.asciidoc"), chunker="asciidoc"),
        RuleConfig(name="code", match=("*.py",), chunker="code"),
        RuleConfig(name="default", match=("*",), chunker="sentence"),
    )


def _engine_names() -> tuple[str, ...]:
    from ingestd.store.vectors.engines import engine_names

    return engine_names()


def _default_engine() -> str | None:
    """``qdrant.engine`` when the config file says nothing: ``$INGESTD_QDRANT_ENGINE``.

    Raises:
        ConfigError: the variable names no engine of the engines' table.
    """
    value = os.environ.get("INGESTD_QDRANT_ENGINE") or None
    names = _engine_names()
    if value is not None and value not in names:
        raise ConfigError([f"INGESTD_QDRANT_ENGINE: expected {spelled(names)} (got {value!r})"])
    return value


class QdrantConfig(ConfigModel):
    """Where vectors live: an embedded engine in the state dir, or a Qdrant server.

    Attributes:
        engine: the embedded engine, a name of the engines' table
            (:data:`ingestd.store.vectors.engines.ENGINES`): ``edge`` (Qdrant Edge,
            Qdrant's engine in-process) or ``local`` (qdrant-client's local mode);
            default ``$INGESTD_QDRANT_ENGINE``, else ``None``: ``edge`` for a new store,
            ``local`` for a store made with it. A store held by another engine moves
            to the configured one (docs/how-it-works/engines.md).
        path: folder of the ``local`` store (default ``<state dir>/qdrant``).
        edge_path: folder of the ``edge`` store (default ``<state dir>/edge``).
        url: Qdrant server or cluster URL (the embedded engines are then unused).
        api_key_env: environment variable holding the API key for ``url``.
        retry_seconds: how long transient server errors are retried before a batch
            is put back on the queue.
    """

    engine: str | None = Field(default_factory=lambda: _default_engine(), validate_default=True)
    path: Path | None = None
    edge_path: Path | None = None
    url: str | None = None
    api_key_env: str = "QDRANT_API_KEY"
    retry_seconds: float = Field(60.0, gt=0)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        problem = None if v is None else http_url_problem(v, "a Qdrant server")
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, v: Any) -> Any:
        names = _engine_names()
        if v is not None and v not in names:
            raise not_one_of(names)
        return v

    def folders(self) -> dict[str, Path]:
        """The embedded engines' folders this section moves out of the state dir, by engine.

        Each engine's spec names its key here
        (:attr:`~ingestd.store.vectors.spec.EngineSpec.config_key`).
        """
        from ingestd.store.vectors.engines import engine_specs

        out = {}
        for spec in engine_specs():
            value = getattr(self, spec.config_key) if spec.config_key else None
            if value:
                out[spec.name] = Path(value)
        return out


class SearchConfig(ConfigModel):
    """How ``ingestd search`` ranks (docs/how-it-works/search.md).

    Attributes:
        mode: ``hybrid`` (dense and BM25 rankings fused by reciprocal rank fusion in
            Qdrant), ``dense`` or ``sparse``; ``search --mode`` overrides it.
        rrf_k: the RRF constant: a hit scores ``1 / (rrf_k + rank - 1)`` per ranking
            (60: Cormack et al., SIGIR 2009).
        candidates: points each ranking gives the fusion (at least ``-k``).
        fusion: ``union`` (every candidate of either ranking scored exactly in the
            other before fusing) or ``rrf`` (each ranking's candidates alone; a
            candidate one ranking missed gets nothing from it).
    """

    mode: Literal["hybrid", "dense", "sparse"] = "hybrid"
    rrf_k: int = Field(60, ge=1)
    candidates: int = Field(50, ge=1, le=10_000)
    fusion: Literal["union", "rrf"] = "union"


class ManifestConfig(ConfigModel):
    """The manifest database: any SQLAlchemy URL (default SQLite ``<state dir>/manifest.db``)."""

    url: str | None = None


class WatchConfig(ConfigModel):
    """Watching and rescans.

    Attributes:
        debounce_ms: quiet period that closes a batch of events, in milliseconds.
        max_delay_ms: longest a change waits during continuous writes, in milliseconds.
        rescan_interval_s: periodic safety rescan (stat fast path), in seconds; 0 = off.
        unwatched_rescan_s: rescan period, in seconds, of a source with folders that
            cannot be watched (the inotify watch limit, a permission error) or whose
            root is missing; its watch is set up again at each of these rescans.
        hard_link_check_s: period, in seconds, of the stat check of the documents
            with more than one hard link (another name of such a file, outside the
            roots too, may change it without an event); 0 = off.
        max_lag_s: a change waiting longer than this, in seconds, makes the daemon
            unhealthy (``status`` exits 1, ``ingestd_up`` is 0) until it is written,
            and so does a git source whose fetches have failed for longer; 0 = never.
    """

    debounce_ms: int = Field(300, ge=0)
    max_delay_ms: int = Field(5000, ge=1)
    rescan_interval_s: float = Field(3600.0, ge=0)
    unwatched_rescan_s: float = Field(60.0, gt=0)
    hard_link_check_s: float = Field(5.0, ge=0)
    max_lag_s: float = Field(180.0, ge=0)


class FilesConfig(ConfigModel):
    """File policy: which files are not indexed (each one listed in ``status``).

    Attributes:
        max_bytes: files over this many bytes are skipped unread.
        max_chunks: files that would make more chunks than this are skipped (20,000
            chunks take about 10-15 minutes of embedding on two CPU cores).
        max_nonprose_chunks: no longer used, accepted so that configs setting it still
            load: chunks that are not prose (base64, minified code: under 2.5 %
            whitespace) are always left out, and a file with no prose is skipped (see
            :mod:`ingestd.daemon.sync.preparing.nonprose`).
        allow_secret_names: gitignore-style globs of paths exempt from the built-in
            deny-list of secret-bearing file names (``.env``, ``id_rsa``, ``.ssh/``,
            ``*.pem``, ``credentials.json``, ...: see
            :data:`ingestd.daemon.sync.preparing.secret_files.SECRET_NAMES`).
        allow_secret_content: gitignore-style globs of paths exempt from the check for
            private-key blocks and access tokens in file text.
        retry_initial_s: first delay, in seconds, before a file that could not be read
            (locked, permission denied, vanished mid-read) is tried again; each failure
            doubles it.
        retry_max_s: longest delay between two tries of such a file, in seconds.
    """

    max_bytes: int = Field(10 * 1024 * 1024, ge=1)
    max_chunks: int = Field(20_000, ge=1)
    max_nonprose_chunks: int = Field(32, ge=0)
    allow_secret_names: tuple[str, ...] = ()
    allow_secret_content: tuple[str, ...] = ()
    retry_initial_s: float = Field(1.0, gt=0)
    retry_max_s: float = Field(300.0, gt=0)

    @model_validator(mode="after")
    def _retry_order(self) -> FilesConfig:
        if self.retry_max_s < self.retry_initial_s:
            raise ValueError("retry_max_s must be at least retry_initial_s")
        return self


class MassDeleteConfig(ConfigModel):
    """Mass-deletion guard for scans: hold deletions over ``max_share`` and ``min_count``."""

    max_share: float = Field(0.2, ge=0, le=1)
    min_count: int = Field(10, ge=0)


class MetricsConfig(ConfigModel):
    """Prometheus metrics endpoint (off unless ``port`` is set)."""

    port: int | None = Field(None, ge=1, le=65535)
    host: str = "127.0.0.1"


class Config(ConfigModel):
    """The whole configuration (see ``config.example.yaml`` for every key)."""

    state_dir: Path | None = None
    sources: tuple[KindedSource, ...] = ()
    rules: tuple[RuleConfig, ...] = Field(default_factory=default_rules)
    tokenizer: str = "cl100k_base"
    embedding: EmbeddingConfig = EmbeddingConfig()
    qdrant: QdrantConfig = Field(default_factory=QdrantConfig)
    search: SearchConfig = SearchConfig()
    manifest: ManifestConfig = ManifestConfig()
    watch: WatchConfig = WatchConfig()
    files: FilesConfig = FilesConfig()
    mass_delete: MassDeleteConfig = MassDeleteConfig()
    metrics: MetricsConfig = MetricsConfig()
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @model_validator(mode="after")
    def _check(self) -> Config:
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return self

    def paths(self, state_dir: Path) -> StatePaths:
        """The entries of ``state_dir`` under this config (``qdrant.path`` moves the store)."""
        return StatePaths(Path(state_dir), self.qdrant.folders())
