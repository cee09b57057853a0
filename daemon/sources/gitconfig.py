"""The configuration of a git source (``kind: git``): its repository, refs and limits.

The reader is :class:`~ingestd.daemon.sources.git.GitSource`; what ``status`` shows of
it is :data:`~ingestd.daemon.sources.mirror.GIT_STATUS` (docs/guides/git-sources.md).

The repository's ``url`` is read as git reads it, in this order (``transport_get`` in
git's ``transport.c``, ``is_url`` in ``url.c``, ``url_is_local_not_ssh`` in
``connect.c``):

1. ``<helper>::<address>``: a remote helper (``ext::``, ``fd::``): never run by ingestd;
2. ``<scheme>://...``: a URL, fetched when its scheme is one of
   :data:`~ingestd.daemon.sources.gitcmd.ALLOWED_PROTOCOLS` (``git+ssh://`` and
   ``ssh+git://`` are git's old names of ``ssh://``); schemes are case-sensitive, as
   in git;
3. no ``:``, or a ``/`` before the first ``:``: a local path (relative to the config
   file);
4. anything else: scp-like ``[user@]host:path``, over ssh.

So a URL git would refuse (``ftp://``, ``HTTPS://``, ``ext::...``) is refused when the
config is read (exit 2), not at the first fetch (:func:`url_problem`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from ingestd.daemon.config.base import ConfigModel
from ingestd.daemon.config.models import SourceConfig
from ingestd.daemon.sources.gitcmd import ALLOWED_PROTOCOLS

__all__ = [
    "ACCEPTED_FORMS",
    "GitCredentialsConfig",
    "GitSourceConfig",
    "UrlForm",
    "url_form",
    "url_problem",
]

#: git's other names of ``ssh://`` (``transport.c``), fetched over ssh.
SSH_ALIASES = ("git+ssh", "ssh+git")
#: What a git source's ``url`` may be, as the error says it.
ACCEPTED_FORMS = (
    "an https://, http://, ssh://, git:// or file:// URL, an scp-like user@host:path, "
    "or a local path"
)
#: ``<scheme>://`` (git's ``is_url``) and ``<helper>::`` (a remote helper).
_SCHEME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9+.-]*)://")
_HELPER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9+.-]*)::")

#: The forms of a repository's address: a remote helper, a URL, a local path, scp-like.
UrlForm = Literal["helper", "url", "local", "scp"]


def url_form(url: str) -> UrlForm:
    """Which form ``url`` is, in git's order of tests (see the module's docstring)."""
    if _HELPER.match(url):
        return "helper"
    if _SCHEME.match(url):
        return "url"
    colon, slash = url.find(":"), url.find("/")
    if colon < 0 or 0 <= slash < colon:
        return "local"
    return "scp"


def url_problem(url: str) -> str | None:
    """Why ingestd cannot fetch the repository at ``url``, or ``None`` if it can.

    Returns:
        One sentence naming the fault and :data:`ACCEPTED_FORMS`.
    """
    if not url.strip():
        return f"empty; expected {ACCEPTED_FORMS}"
    form = url_form(url)
    if form == "helper":
        helper = url.split("::", 1)[0]
        return f"{helper}:: is a git remote helper, never run by ingestd; expected {ACCEPTED_FORMS}"
    if form == "scp":
        host, path = url.split(":", 1)
        if not host.rpartition("@")[2] or not path:
            return f"{url!r} is neither a host:path nor a path; expected {ACCEPTED_FORMS}"
        return None
    if form == "local":
        return None
    scheme = url.split("://", 1)[0]
    if scheme not in (*ALLOWED_PROTOCOLS, *SSH_ALIASES):
        case = " (git reads schemes in lower case)" if scheme.lower() in ALLOWED_PROTOCOLS else ""
        return f"{scheme}:// is not a transport ingestd fetches{case}; expected {ACCEPTED_FORMS}"
    parts = urlsplit(url)
    if scheme == "file":
        return None if parts.path else f"{url!r} names no path; expected {ACCEPTED_FORMS}"
    if not parts.hostname:
        return f"{url!r} names no host; expected {ACCEPTED_FORMS}"
    return None


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
        url: the repository: a local path (relative to the config file), a
            ``file://``, ``https://``, ``http://``, ``ssh://`` or ``git://`` URL, or
            scp-like ``user@host:path`` (over ssh); any other form is a config error
            (:func:`url_problem`).
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

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        problem = None if v is None else url_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v

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
        """This source with a local repository path made absolute (relative to ``base``).

        A URL and an scp-like ``host:path`` are kept as they are; ``~`` is expanded
        (git does not, and runs with a home of its own).
        """
        url = str(self.url)
        if url_form(url) == "local":
            url = str(base / os.path.expanduser(url))  # an absolute path stays itself
        return self.model_copy(update={"url": url})
