"""Configuration: the YAML file's models (:mod:`.models`) and how it is loaded (:mod:`.loading`).

Every name is re-exported here: ``from ingestd.daemon.config import Config, load_config``.
"""

from ingestd.daemon.config.loading import (
    SYSTEM_ROOTS,
    SYSTEM_TREES,
    check_rules,
    format_errors,
    load_config,
    overlap_problems,
    read_yaml,
    system_root_problem,
)
from ingestd.daemon.config.models import (
    DEFAULT_EXCLUDE,
    DEFAULT_INCLUDE,
    Config,
    ConfigError,
    EmbeddingConfig,
    FilesConfig,
    ManifestConfig,
    MassDeleteConfig,
    MetricsConfig,
    QdrantConfig,
    RuleConfig,
    SearchConfig,
    SourceConfig,
    WatchConfig,
    default_rules,
)
from ingestd.daemon.statedir import resolve_state_dir

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_INCLUDE",
    "SYSTEM_ROOTS",
    "SYSTEM_TREES",
    "Config",
    "ConfigError",
    "EmbeddingConfig",
    "FilesConfig",
    "ManifestConfig",
    "MassDeleteConfig",
    "MetricsConfig",
    "QdrantConfig",
    "RuleConfig",
    "SearchConfig",
    "SourceConfig",
    "WatchConfig",
    "check_rules",
    "default_rules",
    "format_errors",
    "load_config",
    "overlap_problems",
    "read_yaml",
    "resolve_state_dir",
    "system_root_problem",
]
