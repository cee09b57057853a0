"""Every error ingestd explains in one line, in one tree: catch ``IngestdError``, or a branch.

An application can catch the whole tree, a family, or one error, from this module::

    from ingestd.daemon import errors

    try:
        hits = client.search("how do I configure the exporter")
    except errors.UnavailableError:  # no daemon on that socket, or the store is down
        ...
    except errors.IngestdError as exc:  # any other known failure: one line for the user
        print(exc, file=sys.stderr)
        sys.exit(exc.exit_code)

The tree (builtin bases kept beside each family, so older ``except ValueError`` or
``except RuntimeError`` clauses still catch them; where each is defined on the right)::

    IngestdError                        exit 1              chunkers.errors
    ├── InputError                      exit 2              chunkers.errors
    │   ├── ConfigError                 ValueError          daemon.config.base
    │   ├── QuestionError               ValueError          daemon.evaluation.questions
    │   ├── UnknownChunkerError         ValueError          chunkers.registry
    │   └── UnknownSourceKindError      ValueError          daemon.sources.kinds
    ├── DocumentError                                       chunkers.errors
    │   └── UndecodableError            ValueError          chunkers.text
    │       ├── BinaryFileError
    │       ├── FormatError                                 chunkers.readers.document
    │       │   └── ExpansionError                          chunkers.readers.expansion
    │       └── NotUTF8Error
    ├── ModelError                                          chunkers.errors
    │   ├── TokenizerError              ValueError          chunkers.sizing.tokenizers
    │   ├── ModelNotFoundError          ValueError          store.embedding.folders
    │   ├── BackendUnavailableError     ValueError          store.embedding.backends
    │   ├── UnsupportedModelError       ValueError          store.embedding.graphs.bert
    │   ├── ExportError                 RuntimeError        store.embedding.graphs.onnx_cache
    │   ├── EndpointDimensionError      ValueError          store.embedding.remote_backend
    │   ├── NonFiniteVectorError        ValueError          store.embedding.finite
    │   └── ModelMismatchError          RuntimeError        store.manifest.collections
    │       └── ProfileUnavailableError                     daemon.sync.profiles.profile
    ├── StateError                                          chunkers.errors
    │   ├── StateDamagedError           RuntimeError        store.common.damage
    │   ├── StoreLostError              RuntimeError        store.common.damage
    │   ├── StoreOwnedError             RuntimeError        daemon.sync.state.ownership
    │   ├── StateLockedError            RuntimeError        daemon.wire.statelock
    │   └── InsecureDirError            OSError             daemon.statedir
    ├── UnavailableError                                    chunkers.errors
    │   ├── GitError                    OSError             daemon.sources.gitcmd
    │   ├── SiteError                   OSError             daemon.sources.sitemap.client
    │   ├── StoreUnavailableError       RuntimeError        store.vectors.base
    │   ├── EndpointError               ConnectionError     store.embedding.remote_backend
    │   └── NoDaemon                                        daemon.wire.errors
    ├── EvalError                       RuntimeError        daemon.evaluation.evaluate
    └── DaemonError                     exit code its own   daemon.wire.errors
        └── SyncTimeout                                     daemon.client.errors

``exit_code`` is the exit status of the ``ingestd`` command that fails with the error
(a :class:`DaemonError` carries the one the command gave: 2 for bad arguments, 130 for
a cancelled ``eval``); a command that expects one of them where it runs may still
answer with its own code (``ingestd chunk`` exits 2 on a bad ``--param``). Not in the
tree, because they never reach a user: the signals between ingestd's own parts
(``SyncInterrupted``, ``UnreadableFile``, ``OutsideRootError``, ``EvalCancelled``,
``MigrationAborted``, ``SitemapFormatError``, which becomes a ``SiteError``),
``EngineError``, a panic of the Qdrant Edge engine, which is unexpected (its traceback
goes to the log), and ``StoreReadOnlyError``, a write asked of a store opened by a
reader (a bug of the reader's code path). Nothing inside ingestd imports this module:
each part imports an error from where it is defined.

The families are imported with this module (they import nothing); every other class on
first use (PEP 562), so catching ``NoDaemon`` loads neither pydantic nor the model
stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ingestd.chunkers.errors import (
    DocumentError,
    IngestdError,
    InputError,
    ModelError,
    StateError,
    UnavailableError,
)

if TYPE_CHECKING:
    from ingestd.chunkers.readers.document import FormatError
    from ingestd.chunkers.readers.expansion import ExpansionError
    from ingestd.chunkers.registry import UnknownChunkerError
    from ingestd.chunkers.sizing.tokenizers import TokenizerError
    from ingestd.chunkers.text import BinaryFileError, NotUTF8Error, UndecodableError
    from ingestd.daemon.client.errors import SyncTimeout
    from ingestd.daemon.config.base import ConfigError
    from ingestd.daemon.evaluation.evaluate import EvalError
    from ingestd.daemon.evaluation.questions import QuestionError
    from ingestd.daemon.sources.gitcmd import GitError
    from ingestd.daemon.sources.kinds import UnknownSourceKindError
    from ingestd.daemon.sources.sitemap.client import SiteError
    from ingestd.daemon.statedir import InsecureDirError
    from ingestd.daemon.sync.profiles.profile import ProfileUnavailableError
    from ingestd.daemon.sync.state.ownership import StoreOwnedError
    from ingestd.daemon.wire.errors import DaemonError, NoDaemon
    from ingestd.daemon.wire.statelock import StateLockedError
    from ingestd.store.common.damage import StateDamagedError, StoreLostError
    from ingestd.store.embedding.backends import BackendUnavailableError
    from ingestd.store.embedding.finite import NonFiniteVectorError
    from ingestd.store.embedding.folders import ModelNotFoundError
    from ingestd.store.embedding.graphs.bert import UnsupportedModelError
    from ingestd.store.embedding.graphs.onnx_cache import ExportError
    from ingestd.store.embedding.remote_backend import EndpointDimensionError, EndpointError
    from ingestd.store.manifest.collections import ModelMismatchError
    from ingestd.store.vectors.base import StoreUnavailableError

__all__ = [
    "BackendUnavailableError",
    "BinaryFileError",
    "ConfigError",
    "DaemonError",
    "DocumentError",
    "EndpointDimensionError",
    "EndpointError",
    "EvalError",
    "ExpansionError",
    "ExportError",
    "FormatError",
    "GitError",
    "IngestdError",
    "InputError",
    "InsecureDirError",
    "ModelError",
    "ModelMismatchError",
    "ModelNotFoundError",
    "NoDaemon",
    "NonFiniteVectorError",
    "NotUTF8Error",
    "ProfileUnavailableError",
    "QuestionError",
    "SiteError",
    "StateDamagedError",
    "StateError",
    "StateLockedError",
    "StoreLostError",
    "StoreOwnedError",
    "StoreUnavailableError",
    "SyncTimeout",
    "TokenizerError",
    "UnavailableError",
    "UndecodableError",
    "UnknownChunkerError",
    "UnknownSourceKindError",
    "UnsupportedModelError",
]

#: Each error that is not a family -> the module that defines it.
HOMES: dict[str, str] = {
    "ConfigError": "ingestd.daemon.config.base",
    "QuestionError": "ingestd.daemon.evaluation.questions",
    "UnknownChunkerError": "ingestd.chunkers.registry",
    "UnknownSourceKindError": "ingestd.daemon.sources.kinds",
    "UndecodableError": "ingestd.chunkers.text",
    "BinaryFileError": "ingestd.chunkers.text",
    "NotUTF8Error": "ingestd.chunkers.text",
    "FormatError": "ingestd.chunkers.readers.document",
    "ExpansionError": "ingestd.chunkers.readers.expansion",
    "TokenizerError": "ingestd.chunkers.sizing.tokenizers",
    "ModelNotFoundError": "ingestd.store.embedding.folders",
    "BackendUnavailableError": "ingestd.store.embedding.backends",
    "UnsupportedModelError": "ingestd.store.embedding.graphs.bert",
    "ExportError": "ingestd.store.embedding.graphs.onnx_cache",
    "EndpointDimensionError": "ingestd.store.embedding.remote_backend",
    "NonFiniteVectorError": "ingestd.store.embedding.finite",
    "ModelMismatchError": "ingestd.store.manifest.collections",
    "ProfileUnavailableError": "ingestd.daemon.sync.profiles.profile",
    "StateDamagedError": "ingestd.store.common.damage",
    "StoreLostError": "ingestd.store.common.damage",
    "StoreOwnedError": "ingestd.daemon.sync.state.ownership",
    "StateLockedError": "ingestd.daemon.wire.statelock",
    "InsecureDirError": "ingestd.daemon.statedir",
    "StoreUnavailableError": "ingestd.store.vectors.base",
    "EndpointError": "ingestd.store.embedding.remote_backend",
    "GitError": "ingestd.daemon.sources.gitcmd",
    "SiteError": "ingestd.daemon.sources.sitemap.client",
    "NoDaemon": "ingestd.daemon.wire.errors",
    "EvalError": "ingestd.daemon.evaluation.evaluate",
    "DaemonError": "ingestd.daemon.wire.errors",
    "SyncTimeout": "ingestd.daemon.client.errors",
}


def __getattr__(name: str) -> Any:
    """The error ``name``, imported from the module that defines it on first use.

    Raises:
        AttributeError: ``name`` is not an error of the tree.
    """
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The names of the tree (for ``dir()`` and completion)."""
    return sorted(__all__)
