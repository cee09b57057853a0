"""A small module for the ``code`` chunker tests."""

from __future__ import annotations

import functools

LIMIT = 10  # module-level code is kept


# A comment between definitions belongs to the definition below it.
@functools.cache
def square(x: int) -> int:
    """Return ``x`` squared."""
    return x * x


async def fetch(url: str) -> str:
    """Pretend to fetch ``url``."""
    return url


class Shape:
    """A shape with an area."""

    sides = 0

    def area(self) -> float:
        """The area of the shape, in square units."""
        return 0.0


class Registry(dict):
    """A registry of named shapes, large enough to be split by method."""

    def register(self, name: str, shape: Shape) -> None:
        """Add ``shape`` under ``name``, refusing duplicates loudly."""
        if name in self:
            raise ValueError(f"shape {name!r} is already registered: {self[name]!r}")
        self[name] = shape

    # Lookup helpers.
    def lookup(self, name: str) -> Shape:
        """The shape registered as ``name``; a clear error lists the known names."""
        try:
            return self[name]
        except KeyError:
            known = ", ".join(sorted(self))
            raise KeyError(f"unknown shape {name!r}; known shapes: {known}") from None

    @property
    def total_area(self) -> float:
        """The sum of the areas of every registered shape, in square units."""
        return sum(shape.area() for shape in self.values())

    class Entry:
        """A nested class stays whole when it fits."""

        name = ""


if __name__ == "__main__":
    print(square(LIMIT))
# trailing comment
