"""Front matter: the YAML (``---``) or TOML (``+++``) block at the top of a markdown page.

Static site generators (Hugo, Jekyll, MkDocs) read page metadata from it. It is not
body text: :func:`parse_front_matter` says where the body starts, and returns the
string values of ``title``, ``linkTitle`` and ``description``. Simple YAML (one-line
strings, block scalars) is read without a YAML parser; anything else goes to PyYAML's
safe loader, imported on first use. Malformed front matter is still not body text.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_front_matter"]

_FM_END = {f: re.compile(r"^(?:" + re.escape(f) + r"|\.\.\.)[ \t]*$", re.M) for f in ("---", "+++")}
_META_KEYS = ("title", "linkTitle", "description")
_SIMPLE = re.compile(
    r"(?P<key>\w+):[ \t]+"
    r"""(?:'(?P<sq>[^'\n]*)'|"(?P<dq>[^"\\\n]*)"|(?P<plain>[^'"\[{>|&*!%@`#\s][^#\n]*?))"""
    r"[ \t]*"
)
_NOT_STRING = re.compile(r"true|false|yes|no|on|off|null|~", re.I)


def _simple_yaml(raw: str) -> dict[str, str] | None:
    """The wanted keys of front matter, read without a YAML parser when that is safe.

    Handles one-line plain or simply quoted strings, and block scalars (``>``, ``|``)
    and plain continuation lines, whose lines are joined with spaces (the caller
    collapses whitespace anyway). Returns ``None`` when a wanted key needs a real
    parser (flow collections, escapes, comments, booleans, anchors).
    """
    out: dict[str, str] = {}
    lines = raw.split("\n")
    for k, line in enumerate(lines):
        key = line.partition(":")[0]
        if key not in _META_KEYS:
            continue
        more: list[str] = []
        for nxt in lines[k + 1 :]:
            if nxt[:1] not in (" ", "\t") and nxt.strip():
                break
            more.append(nxt.strip())
        value = line[len(key) + 1 :].strip()
        if value in (">", ">-", ">+", "|", "|-", "|+") or (
            not value and more and not more[0].startswith(("- ", "[", "{", "'", '"'))
            and ": " not in more[0]
        ):  # fmt: skip
            out[key] = " ".join(more)
            continue
        m = _SIMPLE.fullmatch(line)
        if m is None or (m.group("plain") is None and any(more)):
            return None
        plain = m.group("plain")
        if plain is not None and _NOT_STRING.fullmatch(plain):
            return None
        quoted = m.group("sq") if m.group("sq") is not None else m.group("dq")
        out[key] = " ".join([plain if plain is not None else quoted, *more])
    return out


def parse_front_matter(text: str) -> tuple[int, dict[str, str]]:
    """Find YAML (``---``) or TOML (``+++``) front matter at the top of ``text``.

    Returns:
        ``(body_start, meta)``: the offset where the body begins (0 without front
        matter) and the string values of ``title``, ``linkTitle`` and ``description``.
    """
    for fence in ("---", "+++"):
        if text.startswith(fence + "\n"):
            break
    else:
        return 0, {}
    m = _FM_END[fence].search(text, 4)
    if m is None:
        return 0, {}
    body = m.end() + 1 if m.end() < len(text) else m.end()
    meta: dict[str, str] = {}
    raw = text[4 : m.start()]
    data: Any = _simple_yaml(raw) if fence == "---" else None
    if fence == "---" and data is None:
        try:
            import yaml

            data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except Exception:  # malformed front matter is still not body text
            data = None
    if not isinstance(data, dict):
        sep = "=" if fence == "+++" else ":"
        data = {}
        for line in raw.split("\n"):
            key, _, value = line.partition(sep)
            if key.strip() in _META_KEYS and value.strip():
                data[key.strip()] = value.strip().strip("'\"")
    for key in _META_KEYS:
        value = data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and value.strip():
            meta[key] = " ".join(value.split())
    return body, meta
