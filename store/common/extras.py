"""How to install one of ingestd's extras, said for both ways of installing ingestd.

ingestd is installed from a package index (``pip install ingestd``) or from a clone of
its repository (``pip install .``, the README's way); an extra is then
``pip install 'ingestd[NAME]'`` or, in the clone, ``pip install '.[NAME]'``. A message
that names only the first is wrong for a clone, where no index has the package.
"""

from __future__ import annotations

__all__ = ["extra_hint"]


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
