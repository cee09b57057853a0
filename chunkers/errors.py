"""The root of ingestd's exceptions and its families.

Every failure ingestd can explain in one line (an invalid config, a missing model, a
locked or damaged state dir, a store or daemon that does not answer, a file that is
not text) is an :class:`IngestdError`: its message is that line, and its
:attr:`~IngestdError.exit_code` the exit status of the ``ingestd`` command that met
it. Anything else is unexpected: the command line logs its traceback and exits 3.

The root lives here because the dependencies point one way (``daemon -> store ->
chunkers``): each package derives its errors from these classes, and
:mod:`ingestd.daemon.errors` re-exports the whole tree. The families::

    IngestdError               exit 1: a known failure, said in one line
    ├── InputError             exit 2: what the user gave is invalid
    ├── DocumentError          a document cannot be read as text
    ├── ModelError             the embedding model or tokenizer is missing or differs
    ├── StateError             the state dir is damaged, held or not private
    └── UnavailableError       something ingestd needs does not answer (store, daemon)

A concrete error keeps the builtin base its callers catch it by (``ValueError``,
``RuntimeError``, ``OSError``) beside its family, e.g.
``class TokenizerError(ModelError, ValueError)``. Exceptions that are signals between
ingestd's own parts (a stop requested, a file to retry) are not in the tree: they never
reach a user.

This module imports nothing, so that any command may classify an error for free.
"""

from __future__ import annotations

__all__ = [
    "DocumentError",
    "IngestdError",
    "InputError",
    "ModelError",
    "StateError",
    "UnavailableError",
]


class IngestdError(Exception):
    """A known failure: its message is one line for the user (see the module docstring)."""

    exit_code: int = 1
    """The exit status of an ``ingestd`` command that fails with it."""


class InputError(IngestdError):
    """What the user gave (a config, a rule, a question set, an argument) is invalid."""

    exit_code = 2


class DocumentError(IngestdError):
    """A document cannot be read as text (recorded as that document's error)."""


class ModelError(IngestdError):
    """The embedding model or the tokenizer is missing, unusable or not the one expected."""


class StateError(IngestdError):
    """The state dir cannot be used: a damaged file, another holder, unsafe permissions."""


class UnavailableError(IngestdError):
    """Something ingestd needs does not answer: the vector store, the daemon, a server.

    Attributes:
        transient: the outage is expected to pass by itself (a server down or
            overloaded), so a daemon that meets it keeps its documents waiting and
            stays healthy for up to ``watch.max_lag_s``; ``False`` for what needs a
            person (a refused key, a model the server does not have).
    """

    transient: bool = True
