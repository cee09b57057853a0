"""The configuration of a git source (``kind: git``): its repository, refs and limits.

The reader is :class:`~ingestd.daemon.sources.git.GitSource`; what ``status`` shows of
it is :data:`~ingestd.daemon.sources.mirror.GIT_STATUS` (docs/guides/git-sources.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from ingestd.daemon.config.base import ConfigModel
from ingestd.daemon.config.models import SourceConfig

__all__ = ["GitCredentialsConfig", "GitSourceConfig"]


class GitCredentialsConfig(ConfigModel):
    """Where a git source's credential is found: names of environment variables.

    The values are read when a fetch starts, sent as an HTTP ``Authorization`` header
    through git's environment, and never logged, shown or stored.

    Attributes:
        token_env: the variable holding the token (or the password).
        username_env: the variable holding the user name (HTTP Basic); ``None``: the
            token is sent as a bearer token.
    """

    token_env: str = Field(min_length=1)
    username_env: str | None = None


class GitSourceConfig(SourceConfig):
    """A ``kind: git`` source: the refs of a repository, each a version.

    Attributes:
        url: the repository: a local path (relative to the config file), ``file://``,
            ``https://``, ``ssh://`` or ``git://`` URL.
        refs: the refs indexed, each a version: branch names, and tag names or globs
            (``v*``).
        max_tags: index only this many tags matched by globs, newest (by creation
            date) first; ``None``: all.
        poll_s: seconds between two fetches (``ingestd sync SOURCE`` fetches at once).
        credentials: environment variables holding a credential.
        max_repo_bytes: a repository whose objects take more bytes is refused.

    ``name`` is required; ``include`` and ``exclude`` filter each version's files
    (:class:`~ingestd.daemon.config.models.SourceConfig`). It has no root on this
    machine: its mirror lives in the state dir.
    """

    has_root: ClassVar[bool] = False
    not_read: ClassVar[frozenset[str]] = frozenset({"root", "gitignore"})

    kind: Literal["git"] = "git"
    url: str | None = None
    refs: tuple[str, ...] = ()
    max_tags: int | None = Field(None, ge=1)
    poll_s: float = Field(300.0, gt=0)
    credentials: GitCredentialsConfig | None = None
    max_repo_bytes: int = Field(2 * 1024**3, ge=1)

    @model_validator(mode="after")
    def _repository(self) -> GitSourceConfig:
        missing = [k for k, v in (("url", self.url), ("name", self.name)) if not v]
        if missing:
            raise ValueError(f"a git source needs {' and '.join(missing)}")
        if not self.refs:
            raise ValueError("a git source needs refs (branch names, tag globs like 'v*')")
        bad = [r for r in self.refs if ":" in r or not r.strip()]
        if bad:
            raise ValueError(f"refs: not a ref name: {', '.join(map(repr, bad))}")
        return self

    def resolved(self, base: Path) -> Self:
        """This source with a local repository path made relative to ``base``."""
        url = str(self.url)
        if "://" not in url and not os.path.isabs(os.path.expanduser(url)):
            url = str(base / url)  # a local path, relative to the config file
        return self.model_copy(update={"url": url})
