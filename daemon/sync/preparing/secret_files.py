"""Secrets stay out of the index: secret-bearing file names, and secrets in file text.

A broad include (``**/*``) over a checkout or a home folder reaches files that hold
credentials: ``.env``, ``id_rsa``, ``.ssh/*``, ``*.pem``, ``credentials.json``. Chunked
and embedded, their text would be searchable by anyone who can query the collection.
Two checks keep them out by default
(:func:`~ingestd.daemon.sync.preparing.documents.prepare_document` applies both, so the
daemon, ``resync``, ``verify`` and the from-scratch oracle agree):

* **Names** (:data:`SECRET_NAMES`): gitignore-style globs of files that hold secrets by
  convention. Such a file is not read; it is recorded as a *failed* document whose
  error names the glob, never the content.
* **Content** (:data:`SECRET_PATTERNS`): a private-key block, or a token in a format
  that only a live credential has (each provider prefixes its tokens so that leaks can
  be found). A file holding one is skipped whole; the error names the kind of secret
  and its line, never the secret.

Both are lifted only explicitly, per path, with ``files.allow_secret_names`` and
``files.allow_secret_content`` (gitignore-style globs).

The content patterns follow gitleaks' default rules (``gitleaks/gitleaks:
config/gitleaks.toml``) and detect-secrets' plugins (``Yelp/detect-secrets:
detect_secrets/plugins/``), restricted to formats with a fixed prefix or context, so
documentation that *explains* credentials (placeholders, ``...``, AWS's documented
``EXAMPLE`` keys) is still indexed. detect-secrets itself was measured here at about
7 s per MB of text (line by line, every plugin), against well under 0.1 s for these
expressions: too slow to run on every file of every sync.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pathspec

__all__ = ["SECRET_NAMES", "SECRET_PATTERNS", "SecretPolicy", "find_secret"]

#: Files that hold secrets by convention (gitignore-style globs, matched against the
#: path relative to the source root). After shhgit's file signatures
#: (``eth0izzle/shhgit: config.yaml``) and the usual locations of credentials of
#: ssh, gpg, cloud CLIs, package managers and dotenv.
SECRET_NAMES: tuple[str, ...] = (
    # dotenv files; the templates that projects commit on purpose are allowed
    ".env",
    ".env.*",
    "*.env",
    "!.env.example",
    "!.env.sample",
    "!.env.template",
    "!.env.dist",
    # private keys, key stores, password databases
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ecdsa_sk",
    "id_ed25519",
    "id_ed25519_sk",
    "*_rsa",
    "*_dsa",
    "*_ecdsa",
    "*_ed25519",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.pkcs12",
    "*.jks",
    "*.keystore",
    "*.ppk",
    "*.ovpn",
    "*.kdb",
    "*.kdbx",
    "*.keychain",
    "*.keychain-db",
    "otr.private_key",
    # folders of credentials
    ".ssh/",
    ".gnupg/",
    ".aws/",
    ".azure/",
    ".kube/",
    ".docker/config.json",
    ".config/gcloud/",
    ".config/gh/hosts.yml",
    # credential files of tools
    "credentials",
    "credentials.json",
    "credentials.xml",
    "client_secret*.json",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".my.cnf",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".htpasswd",
    ".dockercfg",
    ".s3cfg",
    ".boto",
    "secrets.yml",
    "secrets.yaml",
    "secrets.json",
    "secrets.toml",
    "*.tfvars",
    "*.tfvars.json",
    "*.tfstate",
    "*.tfstate.backup",
    # shell and database client histories (passwords typed on command lines)
    ".*_history",
    ".history",
)

_B64 = r"[A-Za-z0-9+/]"
_EDGE = r"(?<![A-Za-z0-9_])"  # a token starts at a word edge

#: Kinds of secret found in text: ``(name, prefixes, expression)``. The expression is
#: tried where one of its fixed prefixes occurs (``str.find`` is far faster than a
#: regular-expression search over the whole text) and matches only a credential in its
#: issued format: a key block with a body, a token's prefix, alphabet and length.
SECRET_PATTERNS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # a PEM or PGP private key with a body (a placeholder such as "..." is not one),
    # also inside JSON strings, where its line breaks are "\n" escapes
    (
        "private key block",
        ("-----BEGIN",),
        r"-----BEGIN[A-Z0-9 ]{0,20} PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,300}?" + _B64 + "{40}",
    ),
    (
        "AWS access key id",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        _EDGE + r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    ),
    (
        "AWS secret access key",
        ("aws_secret", "AWS_SECRET", "awsSecret", "AwsSecret"),
        r"(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?" + _B64 + r"{40}(?![A-Za-z0-9+/])",
    ),
    (
        "GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _EDGE + r"gh[pousr]_[A-Za-z0-9]{36}\b",
    ),
    ("GitHub token", ("github_pat_",), _EDGE + r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}\b"),
    ("GitLab token", ("glpat-",), _EDGE + r"glpat-[A-Za-z0-9_-]{20}\b"),
    ("Slack token", ("xox",), _EDGE + r"xox[abposr]-(?:[0-9]{6,}-){1,3}[A-Za-z0-9]{20,}"),
    (
        "Slack webhook",
        ("hooks.slack.com/services/",),
        r"hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,}",
    ),
    ("Stripe live key", ("sk_live_", "rk_live_"), _EDGE + r"[sr]k_live_[A-Za-z0-9]{24,}\b"),
    ("Google API key", ("AIza",), _EDGE + r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    ("OpenAI key", ("sk-",), _EDGE + r"sk-[A-Za-z0-9_-]{0,80}T3BlbkFJ[A-Za-z0-9_-]{20,}"),
    ("Anthropic key", ("sk-ant-",), _EDGE + r"sk-ant-[a-z]{3,6}[0-9]{2}-[A-Za-z0-9_-]{80,}"),
    ("Hugging Face token", ("hf_",), _EDGE + r"hf_[A-Za-z]{34}\b"),
    ("npm token", ("npm_",), _EDGE + r"npm_[A-Za-z0-9]{36}\b"),
    ("PyPI token", ("pypi-AgEIcHlwaS5vcmc",), _EDGE + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
    ("SendGrid key", ("SG.",), _EDGE + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b"),
    ("Azure storage key", ("AccountKey=",), r"AccountKey=" + _B64 + r"{86}=="),
)

#: Documented example credentials (AWS's ``AKIAIOSFODNN7EXAMPLE``, ...) are not secrets.
_EXAMPLE = re.compile(r"EXAMPLE|example|0{8}|X{8}|x{8}")

_COMPILED = tuple((kind, prefixes, re.compile(rx)) for kind, prefixes, rx in SECRET_PATTERNS)


def find_secret(text: str) -> tuple[str, int] | None:
    """The first secret in ``text``, by position: ``(kind, 1-based line)``, or ``None``."""
    best: tuple[int, str] | None = None
    for kind, prefixes, rx in _COMPILED:
        for prefix in prefixes:
            i = text.find(prefix)
            while i != -1 and (best is None or i < best[0]):
                m = rx.match(text, i)
                if m is not None and not _EXAMPLE.search(m.group()):
                    best = (i, kind)
                    break
                i = text.find(prefix, i + 1)
    if best is None:
        return None
    return best[1], text.count("\n", 0, best[0]) + 1


@dataclass(frozen=True)
class SecretPolicy:
    """The secret checks of one configuration.

    Args:
        allow_names: gitignore-style globs of paths exempt from :data:`SECRET_NAMES`.
        allow_content: gitignore-style globs of paths exempt from the content check.
    """

    allow_names: Sequence[str] = ()
    allow_content: Sequence[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_names", pathspec.GitIgnoreSpec.from_lines(SECRET_NAMES))
        object.__setattr__(
            self, "_allow_names", pathspec.GitIgnoreSpec.from_lines(self.allow_names)
        )
        object.__setattr__(
            self, "_allow_content", pathspec.GitIgnoreSpec.from_lines(self.allow_content)
        )

    def name_error(self, rel: str) -> str | None:
        """Why ``rel`` is not read (a secret-bearing name), or ``None``."""
        if not self._names.match_file(rel) or self._allow_names.match_file(rel):  # type: ignore[attr-defined]
            return None
        return (
            "secret-bearing file name (built-in deny-list); not read. "
            "To index it anyway, list it in files.allow_secret_names"
        )

    def content_error(self, rel: str, text: str) -> str | None:
        """Why ``rel`` with decoded ``text`` is skipped (it holds a secret), or ``None``."""
        if self._allow_content.match_file(rel):  # type: ignore[attr-defined]
            return None
        found = find_secret(text)
        if found is None:
            return None
        kind, line = found
        return (
            f"holds a secret ({kind}, line {line}); skipped. "
            "To index it anyway, list it in files.allow_secret_content"
        )
