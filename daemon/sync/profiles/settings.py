"""A profile's recorded settings as plain data: its key, its name, old records.

A *profile* (:mod:`ingestd.daemon.sync.profiles.profile`) is recorded with each collection as a
JSON-ready dict (``model``, ``embedding``, ``model_fingerprint``, ``dim``,
``tokenizer``, ``fit_model``). These helpers read such a dict and import nothing
heavy, so ``ingestd status`` can name profiles without SQLAlchemy, torch or
qdrant-client.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["describe", "profile_key", "recorded_settings"]


def profile_key(settings: Mapping[str, Any]) -> str:
    """A short id of a profile: equal keys make equal points from equal files and rules."""
    ident = [settings["model_fingerprint"], settings["tokenizer"], bool(settings["fit_model"])]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]


def describe(settings: Mapping[str, Any]) -> str:
    """One line naming a profile: ``model NAME (fingerprint F, dim D), tokenizer T, ...``."""
    extra = "".join(
        f", {k} {v}" for k, v in sorted((settings.get("embedding") or {}).items()) if k != "model"
    )
    return (
        f"model {settings['model']} (fingerprint {str(settings['model_fingerprint'])[:12]}, "
        f"dim {settings['dim']}{extra}), tokenizer {settings['tokenizer']}, "
        f"fit_model {'on' if settings['fit_model'] else 'off'}"
    )


def recorded_settings(record: Mapping[str, Any], configured: Mapping[str, Any]) -> dict[str, Any]:
    """The profile a manifest record of a collection says made its points.

    A record written before profiles were recorded knows only the model: its tokenizer
    and ``fit_model`` are taken to be the configured ones (a change of those made
    before the upgrade re-chunks documents in place, by their rule fingerprints).
    """
    settings = record.get("settings")
    if settings:
        return dict(settings)
    return {
        "model": record["model"],
        "embedding": {"model": record["model"]},
        "model_fingerprint": record["model_fingerprint"],
        "dim": record["dim"],
        "tokenizer": configured["tokenizer"],
        "fit_model": configured["fit_model"],
    }
