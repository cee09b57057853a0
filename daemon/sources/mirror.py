"""Where a git source keeps its mirror, and what ``status`` reads of it (no imports).

``status`` and ``sources`` must answer without the config's or git's machinery
(DESIGN.md: commands that need no embedding start within a few tenths of a second),
so what they show of a git source is read here from the mirror's
``ingestd-fetch.json``, written by :class:`~ingestd.daemon.sources.git.GitSource`
after every fetch. It holds no credential.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["STATE_FILE", "mirror_dir", "mirror_status"]

#: The file in a mirror that records its fetches.
STATE_FILE = "ingestd-fetch.json"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def mirror_dir(state_dir: Path, name: str) -> Path:
    """The bare mirror of git source ``name`` in ``state_dir`` (``git/<name>.git``)."""
    return state_dir / "git" / (_SAFE.sub("_", name).strip("._") + ".git")


def mirror_status(root: Path) -> dict[str, Any] | None:
    """What ``status`` shows of the git source whose mirror is ``root``, else ``None``.

    Returns:
        ``url`` (the repository's, redacted; ``None`` before a fetch recorded it),
        ``refs`` (each ``version``, ``ref``, ``commit`` of the last good fetch),
        ``fetched_at`` (seconds since the epoch), ``failing_since`` (fetches fail
        since then, else ``None``) and ``fetch_error`` (redacted), from the mirror's
        ``ingestd-fetch.json``; ``None`` when ``root`` holds no such file.
    """
    try:
        st = json.loads((root / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(st, dict):
        return None
    return {
        "url": st.get("url"),
        "refs": list(st.get("refs") or []),
        "fetched_at": st.get("fetched_at"),
        "failing_since": st.get("failing_since"),
        "fetch_error": st.get("refused") or st.get("error"),
    }
