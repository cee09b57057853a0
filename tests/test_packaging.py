"""The built wheel installs ``ingestd.daemon``, ``ingestd.chunkers``, ``ingestd.store``.

An editable install hides what the wheel lacks, so this builds the real wheel,
unpacks it into a folder and imports every subpackage from there in a fresh process.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.slow


def test_wheel_holds_every_subpackage_and_nothing_at_the_top(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("ingestd-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops <= {"ingestd", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    sources = {
        p.relative_to(REPO).with_suffix("").as_posix()
        for d in ("daemon", "chunkers", "store")
        for p in (REPO / d).rglob("*.py")
    }
    modules = sorted("ingestd." + s.replace("/", ".").removesuffix(".__init__") for s in sources)
    modules = [m for m in modules if not m.endswith("__main__")]
    code = (
        "import importlib, sys\n"
        f"site = {str(site)!r}\n"
        f"for m in {modules!r}:\n"
        "    mod = importlib.import_module(m)\n"
        "    assert mod.__file__.startswith(site), (m, mod.__file__)\n"
        "print('ok', len(sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok")
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert (
        entry
        and "ingestd = ingestd.daemon.cli:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()
    )
