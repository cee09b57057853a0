"""A real MDX documentation tree, installed from the npm registry at a pinned version.

The AI SDK (Vercel's ``ai`` package, Apache-2.0) ships its documentation site's pages
in the package: 303 ``.mdx`` files under ``docs/``, written for the site's MDX
compiler (YAML front matter, JSX components such as ``<Note>``, ``<Tabs>``/``<Tab>``,
``<Snippet text={...} />`` and ``<PropertiesTable content={[...]} />`` whose table is
a JavaScript array literal, ESM ``import`` lines in two pages, fenced code in and out
of components). No file of it is committed here: :func:`mdx_docs` fetches the package
tarball with ``npm pack`` when a test session or a benchmark first asks for it, checks
it against the registry's pinned integrity hash, and unpacks ``docs/`` and the
licence into a cache folder outside the repository.

The question set ``bench/data/mdx-docs-qa.jsonl`` is about this version.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

__all__ = ["INTEGRITY", "PACKAGE", "VERSION", "mdx_docs"]

PACKAGE = "ai"
VERSION = "7.0.173"
#: The registry's ``dist.integrity`` of ``ai@7.0.173`` (``npm view ai@7.0.173 dist.integrity``).
INTEGRITY = (
    "sha512-dLea37zT1h7cjkUsBprU4Rq35HJqhtHHaq1jTAX"
    "jHQoyfpeswpgCrhjZJWdWc10gjEAxmz114py7iLGQ3xIMxw=="
)
_DONE = ".complete"


def _cache_root() -> Path:
    """``$INGESTD_TEST_CACHE``, else ``$XDG_CACHE_HOME/ingestd-tests`` (``~/.cache``)."""
    env = os.environ.get("INGESTD_TEST_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "ingestd-tests"


def mdx_docs(root: Path | None = None) -> Path:
    """The folder of the AI SDK's ``.mdx`` pages (``ai@7.0.173``'s ``docs/``), installed once.

    Args:
        root: the cache folder (default: :func:`_cache_root`); the tree goes to
            ``root/ai-7.0.173/docs``, its licence beside it.

    Returns:
        The ``docs`` folder.

    Raises:
        RuntimeError: ``npm`` is missing or failed, or the tarball does not match
            :data:`INTEGRITY`.
    """
    base = (root or _cache_root()) / f"{PACKAGE}-{VERSION}"
    docs = base / "docs"
    if (base / _DONE).exists():
        return docs
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the MDX tree needs npm (Debian: apt-get install npm)")
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        done = subprocess.run(
            [npm, "pack", f"{PACKAGE}@{VERSION}", "--json", "--pack-destination", tmp],
            capture_output=True, text=True, timeout=600, cwd=tmp,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"npm pack {PACKAGE}@{VERSION} failed: {done.stderr.strip()}")
        tarball = Path(tmp) / json.loads(done.stdout)[0]["filename"]
        data = tarball.read_bytes()
        got = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
        if got != INTEGRITY:
            raise RuntimeError(f"{tarball.name}: integrity {got}, expected {INTEGRITY}")
        out = Path(tmp) / "out"
        with tarfile.open(tarball) as tar:
            members = [
                m
                for m in tar.getmembers()
                if m.isfile()
                and (m.name.startswith("package/docs/") or m.name == "package/LICENSE")
            ]
            tar.extractall(out, members=members, filter="data")
        if docs.exists():
            shutil.rmtree(docs)
        (out / "package" / "docs").rename(docs)
        (out / "package" / "LICENSE").replace(base / "LICENSE")
    (base / _DONE).write_text(f"{PACKAGE}@{VERSION} {INTEGRITY}\n")
    return docs


if __name__ == "__main__":
    print(mdx_docs())
