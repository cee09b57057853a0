"""What every configuration model shares: its base class, its error, and wording.

Every model is frozen and rejects unknown keys (``config.example.yaml`` explains each).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, ModelWrapValidatorHandler, ValidationError
from pydantic import model_validator as _model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ingestd.chunkers.errors import InputError

__all__ = [
    "ConfigError",
    "ConfigModel",
    "carried_errors",
    "did_you_mean",
    "http_url_problem",
    "known_keys_only",
    "not_one_of",
    "spelled",
]

T = TypeVar("T")


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


def did_you_mean(word: str, choices: Collection[str]) -> str:
    """``did you mean NEAREST? `` for the choice nearest ``word``, or ``""`` if none is near.

    Near is :func:`difflib.get_close_matches`' ratio of at least 0.6 (its default): a
    typo (``pol_s``, ``inclde``, ``gti``) finds its word, an unrelated word nothing.
    """
    near = difflib.get_close_matches(word, sorted(choices), n=1)
    return f"did you mean {near[0]}? " if near else ""


def http_url_problem(url: str, what: str) -> str | None:
    """Why ``url`` is not an ``http://`` or ``https://`` URL with a host, or ``None``.

    The rule of every key that names a server spoken to over HTTP (``qdrant.url``,
    ``embedding.url``; a sitemap's ``url`` has the same rule).

    Args:
        url: the configured value.
        what: what the server is, for the message (``a Qdrant server``).
    """
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        return None
    return f"expected an http:// or https:// URL of {what}"


def _unknown_key(key: str, known: Collection[str]) -> PydanticCustomError:
    near = did_you_mean(key, known).rstrip()
    return PydanticCustomError(
        "unknown_key",
        "unknown key; check its spelling {hint}",
        {"hint": f"({near})" if near else "against config.example.yaml"},
    )


def carried_errors(exc: ValidationError) -> list[InitErrorDetails]:
    """The errors of ``exc``, to be raised again beside others (their wording kept)."""
    return [
        {
            "type": PydanticCustomError(err["type"], err["msg"]),
            "loc": err["loc"],
            "input": err["input"],
        }
        for err in exc.errors()
    ]


def known_keys_only(
    value: Mapping[Any, Any], known: Collection[str], validate: Callable[[Any], T], title: str
) -> T:
    """``validate(value)``, but a key not in ``known`` is an error with the nearest key.

    Each unknown key is an ``unknown_key`` error: ``unknown key; check its spelling (did
    you mean poll_s?)`` when a key is near (:func:`did_you_mean`), else ``... against
    config.example.yaml``. They are reported with
    the errors of the other keys (validated without the unknown ones), as pydantic's
    ``extra="forbid"`` reports them all, but without a suggestion.

    Args:
        value: a mapping of keys to values (a YAML section).
        known: the keys the section takes.
        validate: validates the section (a model's validator, or its wrap handler).
        title: the model's name, for the error.

    Raises:
        ValidationError: an unknown key, or any error of ``validate``.
    """
    unknown = [key for key in value if key not in known]
    if not unknown:
        return validate(value)
    errors: list[InitErrorDetails] = [
        {"type": _unknown_key(str(key), known), "loc": (str(key),), "input": value[key]}
        for key in unknown
    ]
    try:
        validate({k: v for k, v in value.items() if k not in unknown})
    except ValidationError as exc:
        errors += carried_errors(exc)
    raise ValidationError.from_exception_data(title, errors)


class ConfigModel(BaseModel):
    """The base of every config model: frozen, and unknown keys are errors.

    An unknown key names the nearest key of its model (:func:`known_keys_only`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def keys(cls) -> frozenset[str]:
        """The keys this model's section of the YAML file may have."""
        return frozenset(cls.model_fields)

    @_model_validator(mode="wrap")
    @classmethod
    def _known_keys(cls, value: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        if not isinstance(value, Mapping):
            return handler(value)
        return known_keys_only(value, cls.keys(), handler, cls.__name__)
