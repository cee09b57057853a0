"""Running the ``git`` command on a fetched repository, hardened against its contents.

A repository fetched from elsewhere is data, never code: :class:`GitRunner` runs
``git`` with an environment that no configuration, hook, filter or credential helper
outside ingestd's reaches:

* no system or global config (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``,
  ``HOME`` set to the mirror's own folder), no terminal prompt
  (``GIT_TERMINAL_PROMPT=0``), no credential helper, no ``ssh`` host-key prompt;
* ``core.hooksPath`` points at an empty folder and ``core.fsmonitor`` is off, so no
  hook or monitor runs; documents are read from objects with ``cat-file`` (no
  checkout, hence no ``.gitattributes`` filter, smudge or LFS driver); submodules
  are never fetched (``fetch.recurseSubmodules=false``, ``submodule.recurse=false``);
* transports are limited to ``file``, ``git``, ``http``, ``https`` and ``ssh``
  (``protocol.allow=never`` plus an allow-list; ``ext::`` and ``fd::`` never run);
* a credential is never on a command line, where any user of the machine may read it
  (``ps``, ``/proc/PID/cmdline``), and is redacted from every message (:func:`redact`):
  a configured one is passed in the environment as the value of ``http.extraHeader``
  (``GIT_CONFIG_VALUE_<n>``); one in a URL's user info (``https://user:token@host``)
  is taken out of the URL (:func:`split_login`) and given to git by ingestd's own
  credential helper, a shell function that answers from environment variables for
  the URL's host only (git's credential protocol:
  https://git-scm.com/docs/gitcredentials#_custom_helpers).

``git`` settings in the environment: git's own ``GIT_CONFIG_COUNT`` mechanism
(git 2.31+, https://git-scm.com/docs/git-config#ENVIRONMENT).
"""

from __future__ import annotations

import base64
import fnmatch
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote

from ingestd.chunkers.errors import UnavailableError

__all__ = [
    "LFS_POINTER",
    "GitError",
    "GitRunner",
    "Login",
    "blob_sizes",
    "credential_header",
    "diffed_entries",
    "error_reason",
    "lfs_pointers",
    "not_ancestors",
    "output_lines",
    "redact",
    "redact_url",
    "repo_bytes",
    "selected_refs",
    "split_login",
    "tree_entries",
]

#: Transports a fetch may use (``protocol.<name>.allow=always``); every other is refused.
ALLOWED_PROTOCOLS = ("file", "git", "http", "https", "ssh")
#: Longest a single ``git`` command may run, seconds (a fetch of a large repository).
DEFAULT_TIMEOUT_S = 600.0
#: A Git LFS pointer file starts with this line (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md).
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]+@", re.IGNORECASE)


#: ingestd's credential helper (a ``!`` helper: git runs it with ``sh -c``, ``get`` as
#: its argument and the request on its standard input): the login in its environment,
#: for the host it was given for and no other (a redirect to another host gets none).
CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || exit 0; h=; '
    'while IFS= read -r l && test -n "$l"; do case "$l" in host=*) h="${l#host=}";; esac; done; '
    'test "$h" = "$INGESTD_GIT_HOST" || exit 0; '
    'printf \'username=%s\\npassword=%s\\n\' "$INGESTD_GIT_USERNAME" "$INGESTD_GIT_PASSWORD"; '
    "}; f"
)
_LOGIN_SCHEMES = ("http://", "https://")


class Login(NamedTuple):
    """A user name and password taken from a URL's user info, for the URL's host.

    Attributes:
        username: the user name, percent-decoded (a forge's token, when no password).
        password: the password or token, percent-decoded (``""`` when none).
        host: ``host[:port]`` of the URL, as git's credential protocol names it.
    """

    username: str
    password: str
    host: str


def split_login(url: str) -> tuple[str, Login | None]:
    """``url`` without the credential of its user info, and that credential.

    An ``http``/``https`` URL loses its user info whole (a forge's token is often the
    user name), returned as a :class:`Login`; an ``ssh`` URL loses a password (ssh runs
    in batch mode and never takes one) and keeps its user name, which is no secret.
    Every other URL or path is returned as it is.
    """
    scheme = next((p for p in (*_LOGIN_SCHEMES, "ssh://") if url.lower().startswith(p)), None)
    if scheme is None:
        return url, None
    rest = url[len(scheme) :]
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, host = authority.rpartition("@")
    if not at:
        return url, None
    tail = rest[len(authority) :]
    user, colon, password = userinfo.partition(":")
    if scheme == "ssh://":
        return f"{url[: len(scheme)]}{user}@{host}{tail}", None
    login = Login(unquote(user), unquote(password) if colon else "", host)
    return f"{url[: len(scheme)]}{host}{tail}", login


class GitError(UnavailableError, OSError):
    """A ``git`` command failed (its message redacted: no credential in it)."""


def redact_url(url: str) -> str:
    """``url`` without a user name or password (``https://user:pw@host`` -> ``https://***@host``)."""
    return _USERINFO.sub(r"\g<scheme>***@", url)


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every one of ``secrets`` (and URL user info) replaced by ``***``."""
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return redact_url(text)


def credential_header(env: Mapping[str, str], username_env: str | None, token_env: str) -> str:
    """The ``Authorization`` header of a credential read from environment variables.

    Args:
        env: the environment (``os.environ``).
        username_env: the variable holding the user name (HTTP Basic), or ``None`` for a
            bearer token.
        token_env: the variable holding the password or token.

    Returns:
        ``"Authorization: Basic <base64>"`` or ``"Authorization: Bearer <token>"``.

    Raises:
        GitError: a named variable is not set.
    """
    missing = [n for n in (username_env, token_env) if n and not env.get(n)]
    if missing:
        raise GitError(f"credential environment variable(s) not set: {', '.join(missing)}")
    token = env[token_env]
    if username_env:
        pair = f"{env[username_env]}:{token}".encode()
        return f"Authorization: Basic {base64.b64encode(pair).decode('ascii')}"
    return f"Authorization: Bearer {token}"


class GitRunner:
    """Runs ``git`` in one bare repository with the hardened environment (module docstring).

    Args:
        git_dir: the bare repository (``GIT_DIR``).
        header: an ``http.extraHeader`` value carrying a credential, or ``None``.
        login: a URL's credential, answered by :data:`CREDENTIAL_HELPER`, or ``None``.
        secrets: strings redacted from every message (the credential's parts).
        timeout_s: longest one command may run, in seconds.
    """

    def __init__(
        self,
        git_dir: Path,
        *,
        header: str | None = None,
        login: Login | None = None,
        secrets: Sequence[str] = (),
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.git_dir = git_dir
        self.timeout_s = timeout_s
        self._secrets = [*secrets, header or ""]
        if login is not None:  # a user name without a password is a token
            self._secrets.append(login.password or login.username)
        self._header = header
        self._login = login

    def env(self) -> dict[str, str]:
        """The environment every command runs with (a fresh dict; holds the credential)."""
        home = self.git_dir / "ingestd-home"
        settings: list[tuple[str, str]] = [
            ("core.hooksPath", str(home / "no-hooks")),
            ("core.fsmonitor", "false"),
            ("core.askPass", ""),
            ("credential.helper", ""),
            ("fetch.recurseSubmodules", "false"),
            ("submodule.recurse", "false"),
            ("protocol.allow", "never"),
            ("gc.auto", "0"),
            *((f"protocol.{p}.allow", "always") for p in ALLOWED_PROTOCOLS),
        ]
        if self._header:
            settings.append(("http.extraHeader", self._header))
        if self._login is not None:  # after the empty value, which clears the list
            settings.append(("credential.helper", CREDENTIAL_HELPER))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home),
            "LC_ALL": "C",
            "GIT_DIR": str(self.git_dir),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "/bin/false",
            "SSH_ASKPASS": "/bin/false",
            "GIT_SSH_COMMAND": "ssh -o BatchMode=yes",
            "GIT_LFS_SKIP_SMUDGE": "1",
            "GIT_ALLOW_PROTOCOL": ":".join(ALLOWED_PROTOCOLS),
            "GIT_PROTOCOL_FROM_USER": "0",
            "GIT_CONFIG_COUNT": str(len(settings)),
        }
        if self._login is not None:
            env["INGESTD_GIT_USERNAME"] = self._login.username
            env["INGESTD_GIT_PASSWORD"] = self._login.password
            env["INGESTD_GIT_HOST"] = self._login.host
        if "SSH_AUTH_SOCK" in os.environ:  # an ssh agent the daemon was given
            env["SSH_AUTH_SOCK"] = os.environ["SSH_AUTH_SOCK"]
        for i, (k, v) in enumerate(settings):
            env[f"GIT_CONFIG_KEY_{i}"] = k
            env[f"GIT_CONFIG_VALUE_{i}"] = v
        return env

    def run(self, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
        """Run ``git ARGS`` and return its standard output (bytes).

        Raises:
            GitError: it exited non-zero (when ``check``), timed out or could not start;
                the message holds git's reason (:func:`error_reason`), redacted.
        """
        try:
            proc = subprocess.run(
                ["git", *args],
                input=input,
                capture_output=True,
                env=self.env(),
                cwd=self.git_dir if self.git_dir.is_dir() else None,
                timeout=self.timeout_s,
                check=False,
                umask=0o077,  # the mirror is state: private, whatever the daemon's umask
            )
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} took over {self.timeout_s:.0f} s") from None
        except OSError as exc:
            raise GitError(f"cannot run git: {exc.strerror or exc}") from None
        if check and proc.returncode != 0:
            why = error_reason(proc.stderr)
            raise GitError(redact(f"git {args[0]} failed: {why}", self._secrets))
        return proc.stdout

    def redact(self, text: str) -> str:
        """``text`` without this runner's credential (see :func:`redact`)."""
        return redact(text, self._secrets)


#: What git prints after the error that says what is wrong: the same for every failed
#: remote (``Could not read from remote repository``, then the two lines of advice
#: ``Please make sure you have the correct access rights`` / ``and the repository
#: exists.``, from git's ``connect.c``), and hints. None of it names the fault.
_GENERIC = re.compile(
    r"^(fatal: could not read from remote repository\.?"
    r"|please make sure you have the correct access rights"
    r"|and the repository exists\.?"
    r"|hint:.*)$",
    re.IGNORECASE,
)
_ERROR_PREFIX = re.compile(r"^(fatal|error): *", re.IGNORECASE)


def error_reason(stderr: bytes) -> str:
    """What a failed git command says is wrong, from its standard error (one line).

    git's ``fatal:``/``error:`` lines name the fault (``'/srv/repo' does not appear to
    be a git repository``, ``unable to access 'https://…': Could not resolve host``);
    the lines git adds after any failed remote (``Could not read from remote
    repository``, ``Please make sure you have the correct access rights…``) and hints
    are dropped. Without an error line, the last two other lines are kept.

    Args:
        stderr: git's standard error (UTF-8; undecodable bytes replaced).

    Returns:
        The error lines without their ``fatal:``/``error:`` prefix, joined with ``"; "``
        (the first two), or ``"(no message)"``.
    """
    lines = [ln.strip() for ln in output_lines(stderr) if ln.strip()]
    kept = [ln for ln in lines if not _GENERIC.match(ln)]
    errors = [_ERROR_PREFIX.sub("", ln) for ln in kept if _ERROR_PREFIX.match(ln)]
    chosen = list(dict.fromkeys(errors))[:2] or kept[-2:] or lines[-2:]
    return "; ".join(chosen) or "(no message)"


def output_lines(raw: bytes) -> list[str]:
    """The non-empty lines of a command's output (UTF-8, undecodable bytes replaced)."""
    return [line for line in raw.decode("utf-8", "replace").splitlines() if line]


def selected_refs(listing: bytes, patterns: Iterable[str]) -> dict[str, str]:
    """The refs of ``git ls-remote`` output ``listing`` that ``patterns`` select: ref -> commit.

    A pattern is a branch or tag name (the branch first when both exist), or a glob
    (``*?[``) matched against tag names only.
    """
    remote: dict[str, str] = {}
    for line in output_lines(listing):
        oid, _, ref = line.partition("\t")
        remote[ref] = oid
    out: dict[str, str] = {}
    for pattern in patterns:
        if set("*?[") & set(pattern):
            for ref, oid in remote.items():
                if ref.startswith("refs/tags/") and fnmatch.fnmatchcase(ref[10:], pattern):
                    out[ref] = oid
            continue
        for ref in (f"refs/heads/{pattern}", f"refs/tags/{pattern}"):
            if ref in remote:
                out[ref] = remote[ref]
                break
    return out


def blob_sizes(git: GitRunner, oids: list[str]) -> dict[str, int]:
    """Sizes (bytes) of blobs ``oids`` (one ``git cat-file --batch-check``)."""
    if not oids:
        return {}
    out = git.run("cat-file", "--batch-check", input=("\n".join(oids) + "\n").encode())
    res: dict[str, int] = {}
    for line in output_lines(out):
        oid, _, size = (line.split() + ["", ""])[:3]
        if size.isdigit():
            res[oid] = int(size)
    return res


def lfs_pointers(git: GitRunner, oids: list[str]) -> dict[str, bool]:
    """Which of the blobs ``oids`` are Git LFS pointer files (one ``cat-file --batch``)."""
    out = git.run("cat-file", "--batch", input=("\n".join(oids) + "\n").encode())
    res: dict[str, bool] = {}
    pos = 0
    for oid in oids:
        nl = out.index(b"\n", pos)
        header = out[pos:nl].split()
        size = int(header[2]) if len(header) == 3 else 0
        body = out[nl + 1 : nl + 1 + size]
        res[oid] = body.startswith(LFS_POINTER)
        pos = nl + 1 + size + 1
    return res


def repo_bytes(git: GitRunner) -> int:
    """Bytes of the mirror's objects (``git count-objects -v``: loose plus packs)."""
    kib = 0
    for line in output_lines(git.run("count-objects", "-v")):
        key, _, value = line.partition(":")
        if key in ("size", "size-pack"):
            kib += int(value.strip() or 0)
    return kib * 1024


#: A tree entry: ``(mode, object id, size in bytes)`` (size 0 for a submodule).
TreeEntry = tuple[str, str, int]


def tree_entries(
    git: GitRunner, commit: str, accepts: Callable[[str], bool]
) -> dict[str, TreeEntry]:
    """Every entry of ``commit``'s tree whose path ``accepts``: path -> :data:`TreeEntry`."""
    raw: dict[str, TreeEntry] = {}
    for item in git.run("ls-tree", "-r", "-z", "-l", "--full-tree", commit).split(b"\0"):
        if not item:
            continue
        meta, _, raw_path = item.partition(b"\t")
        mode, _kind, oid, size = meta.decode().split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if accepts(path):
            raw[path] = (mode, oid, 0 if size == "-" else int(size))
    return raw


def diffed_entries(
    git: GitRunner,
    before: dict[str, TreeEntry],
    base: str,
    commit: str,
    accepts: Callable[[str], bool],
) -> dict[str, TreeEntry]:
    """``base``'s entries ``before`` with the diff of ``base`` and ``commit`` applied."""
    raw = dict(before)
    changed: dict[str, tuple[str, str]] = {}
    out = git.run("diff-tree", "-r", "-z", "--no-renames", "--raw", base, commit)
    parts = out.split(b"\0")
    for meta, raw_path in zip(parts[0::2], parts[1::2], strict=False):
        if not meta.startswith(b":"):
            continue
        _, new_mode, _, new_oid, status = meta[1:].decode().split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if status == "D":
            raw.pop(path, None)
        elif accepts(path):
            changed[path] = (new_mode, new_oid)
    sizes = blob_sizes(git, sorted({o for m, o in changed.values() if m != "160000"}))
    for path, (mode, oid) in changed.items():
        raw[path] = (mode, oid, sizes.get(oid, 0))
    return raw


def not_ancestors(git: GitRunner, tip: str, commits: Iterable[str]) -> set[str]:
    """Those of ``commits`` that are not ``tip`` or an ancestor of it.

    One ``git cat-file --batch-check`` (a commit the repository lacks is not one) and
    one ``git rev-list`` of the others against ``tip``, which walks back only to where
    they meet ``tip``'s history.
    """
    wanted = sorted(set(commits) - {tip})
    if not wanted:
        return set()
    known = set(blob_sizes(git, wanted))  # any object: its size
    listed = "".join(f"{c}\n" for c in sorted(known)) + f"^{tip}\n"
    off = set(output_lines(git.run("rev-list", "--stdin", input=listed.encode())))
    return (set(wanted) - known) | (known & off)
