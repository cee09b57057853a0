"""Where a store's writes for a collection name go: the name itself, or a version being built.

While a collection version is built (:class:`~ingestd.store.vectors.versions.CollectionVersions`),
reads keep naming the alias and its current version answers them, but writes for the
name go to the new version. Every store keeps that routing the same way, with
:class:`RoutedWrites`.
"""

from __future__ import annotations

__all__ = ["RoutedWrites"]


class RoutedWrites:
    """The write routing of a :class:`~ingestd.store.vectors.base.VectorStore` (a mixin).

    A store calls ``super().__init__()`` (or this ``__init__``) before routing writes,
    and resolves the collection each write goes to with :meth:`write_target`.

    Attributes:
        written: every collection a write went to since the store was opened (its
            clean close counts their points again; the others' are as they were).
    """

    def __init__(self) -> None:
        self._write_to: dict[str, str] = {}
        self.written: set[str] = set()

    def route_writes(self, name: str, physical: str | None) -> None:
        """Send writes for ``name`` to ``physical`` (a version being built), or back.

        Args:
            name: a collection name (alias).
            physical: the physical collection writes go to; ``None``: ``name`` again.
        """
        if physical is None:
            self._write_to.pop(name, None)
        else:
            self._write_to[name] = physical

    def write_target(self, name: str) -> str:
        """The collection that writes for ``name`` go to (the name, or a build)."""
        target = self._write_to.get(name, name)
        self.written.add(target)
        return target
