"""What every configuration model shares: its base class, its error, and wording.

Every model is frozen and rejects unknown keys (``config.example.yaml`` explains each).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from ingestd.chunkers.errors import InputError

__all__ = ["ConfigError", "ConfigModel", "not_one_of", "spelled"]


class ConfigError(InputError, ValueError):
    """The configuration is invalid; ``str()`` is one ``key.path: problem`` line per error."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def spelled(names: Sequence[str], quote: bool = False) -> str:
    """``names`` as a sentence lists them: ``a``, ``a or b``, ``a, b or c`` (quoted)."""
    words = [f"'{n}'" if quote else n for n in names]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def not_one_of(names: Sequence[str]) -> PydanticCustomError:
    """The error of a value that is none of ``names`` (worded as pydantic's ``Literal``)."""
    return PydanticCustomError(
        "literal_error", "Input should be {expected}", {"expected": spelled(names, True)}
    )


class ConfigModel(BaseModel):
    """The base of every config model: frozen, and unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")
