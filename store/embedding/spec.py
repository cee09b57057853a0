"""What an embedding backend is: :class:`BackendSpec`, and the :class:`Embedder` it loads.

``embedding.backend`` names an entry of the backends' table
(:data:`ingestd.store.embedding.backends.BACKENDS`). Its spec says, without importing
anything heavy, everything ingestd needs to know about the backend:

* what it needs installed (:attr:`BackendSpec.requires`) and how to install it
  (:attr:`BackendSpec.install_hint`);
* whether it runs on the CPU only (:attr:`BackendSpec.cpu_only`);
* its fingerprint rule (:meth:`BackendSpec.fingerprint`): what identifies the vectors it
  makes, from what identifies the model (its files' fingerprint for a local folder, the
  model's name at an endpoint for a remote backend);
* what is known about a model it runs (:meth:`BackendSpec.model_info`: from a local
  folder, or from elsewhere);
* how it loads (:meth:`BackendSpec.load`): an :class:`Embedder` that loads its weights,
  session or connection on the first text that needs a vector.

:class:`FolderBackend` is the base of the backends that run a model folder themselves.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from ingestd.store.embedding.folders import read_model_folder
from ingestd.store.embedding.model import Endpoint, ModelInfo

if TYPE_CHECKING:
    from ingestd.store.embedding.graphs.recipes import OnnxRecipe
    from ingestd.store.embedding.model import Vectors

__all__ = ["BackendSpec", "Embedder", "FolderBackend"]


class Embedder(Protocol):
    """What a backend's :meth:`BackendSpec.load` returns: texts in, unit vectors out.

    Attributes:
        batch_size: texts per call of the model (a backend may run them one by one).
        calls: model calls made so far.
    """

    batch_size: int
    calls: int

    @property
    def loaded(self) -> bool:
        """Whether the model (weights, session, connection) has been loaded."""
        ...

    def load(self) -> None:
        """Load the model now (thread-safe; a concurrent call waits for the first)."""
        ...

    def __call__(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``: an ``(n, dim)`` float32 array of unit vectors."""
        ...


class BackendSpec(ABC):
    """Everything about one embedding backend, read without importing it.

    A subclass per backend, instantiated in its light module and named in
    :data:`ingestd.store.embedding.backends.BACKENDS`.

    Attributes:
        name: the backend's name (``embedding.backend``, ``ModelInfo.backend``).
        requires: import names of the packages it needs beyond ingestd's own.
        install_hint: the command that installs them.
        cpu_only: it runs on the CPU only (``embedding.device`` must be ``cpu``).
    """

    name: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""
    cpu_only: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    def missing(self) -> list[str]:
        """The packages of :attr:`requires` that cannot be imported here (none imported)."""
        return [p for p in self.requires if importlib.util.find_spec(p) is None]

    @abstractmethod
    def fingerprint(self, source: str, recipe: OnnxRecipe | None = None) -> str:
        """What identifies the vectors this backend makes of the model ``source`` names.

        Args:
            source: what identifies the model: the sha256 hex of its files for a local
                folder; for a remote backend, the endpoint's model name.
            recipe: a recipe other than the backend's own (ONNX backends; benchmarks
                and tests).

        Returns:
            sha256 hex (the ``torch`` backend: ``source`` itself).
        """

    def aliases(self, source: str, recipe: OnnxRecipe | None = None) -> tuple[str, ...]:
        """Other fingerprints the same vectors were recorded under (by earlier versions).

        A collection recorded under one of them is the configured profile's: it is
        taken over, its cached vectors kept (see
        :meth:`ingestd.daemon.sync.profiles.profiles.Profiles.profile_of`). None by default.
        """
        return ()

    @abstractmethod
    def model_info(
        self, model: str, recipe: OnnxRecipe | None = None, endpoint: Endpoint | None = None
    ) -> ModelInfo:
        """What is known about ``model`` run by this backend, without loading it.

        Args:
            model: the configured model name (a local backend: a bundled name or a folder).
            recipe: a recipe other than the backend's own (ONNX backends).
            endpoint: where a remote backend's model answers (local backends ignore it).

        Raises:
            ValueError: a remote backend without its endpoint.
            ingestd.store.embedding.folders.ModelNotFoundError: a local backend's model
                is not available here.
        """

    @abstractmethod
    def load(
        self,
        info: ModelInfo,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        threads: int | None = None,
        cache_dir: Path | None = None,
    ) -> Embedder:
        """The embedder of ``info``; nothing heavy is imported until its first text.

        Args:
            info: the model (see :meth:`model_info`).
            device: torch device (backends of :attr:`cpu_only` ignore it).
            batch_size: texts per model call.
            threads: threads that embed (``None``: the library's default, or one per core).
            cache_dir: where derived model files are kept (``None``: the default).
        """


class FolderBackend(BackendSpec):
    """A backend that runs a local model folder itself (:mod:`~ingestd.store.embedding.folders`).

    Attributes:
        recipe: how the model is turned into what the backend runs (``None``: it runs the
            folder as it is, and a recipe given to :meth:`model_info` is ignored).
    """

    recipe: ClassVar[OnnxRecipe | None] = None

    def model_info(
        self, model: str, recipe: OnnxRecipe | None = None, endpoint: Endpoint | None = None
    ) -> ModelInfo:
        """``model``'s folder read, its fingerprint by this backend's rule; no heavy import.

        ``endpoint`` is ignored (the model is a local folder).

        Raises:
            ingestd.store.embedding.folders.ModelNotFoundError: no such local or bundled model.
        """
        recipe = (recipe or self.recipe) if self.recipe is not None else None
        folder = read_model_folder(model)
        return ModelInfo(
            name=model,
            path=folder.path,
            fingerprint=self.fingerprint(folder.files_fingerprint, recipe),
            dim=folder.dim,
            max_seq_length=folder.max_seq_length,
            tokenizer_json=folder.tokenizer_json,
            backend=self.name,
            recipe=recipe,
            files_fingerprint=folder.files_fingerprint,
        )
