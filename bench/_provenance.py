"""Provenance line shared by the benchmarks: which code produced the figures."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def provenance() -> str:
    """git HEAD, whether chunkers/ is modified, and the chunkers' code fingerprint."""
    from ingestd.daemon.sync.preparing.rules import chunkers_code_fingerprint

    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "chunkers"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        head, dirty = "?", ""
    state = "chunkers/ modified in the work tree" if dirty else "chunkers/ clean"
    return f"git {head or '?'}, {state}, chunkers code {chunkers_code_fingerprint()[:12]}"
