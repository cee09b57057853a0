"""A package of an extra that is not installed: one line naming the extra, never a crash.

Each extra's packages may be missing (``pip install ingestd`` installs none of them);
the command that needs one says which extra installs it, for both ways of installing
ingestd, and exits 1, as a missing store library or embedding backend does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.shared.errors import handle_errors
from ingestd.store.common.extras import EXTRA_MODULES, missing_modules
from tests.test_structure import ROOT


def _failing(exc: BaseException) -> click.Command:
    @click.command()
    @handle_errors
    def cmd() -> None:
        raise exc

    return cmd


def test_ingestd_ui_without_jinja2_names_the_ui_extra(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    # the import system's way to make a module unimportable, in the real process
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['jinja2'] = None\n")
    env = {**os.environ, "PYTHONPATH": f"{shim}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "ingestd.daemon", "ui", "--state-dir", str(tmp_path / "state")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "ingestd ui needs the ui extra: `pip install 'ingestd[ui]'`" in lines[0]
    assert "`pip install '.[ui]'`" in lines[0] and "jinja2 not installed" in lines[0]
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_blocked_module_is_missing_and_an_installed_one_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert missing_modules("ui") == []
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert missing_modules("ui") == ["uvicorn"]


@pytest.mark.parametrize(
    ("exc", "extra"),
    [
        (ModuleNotFoundError("No module named 'torch'", name="torch"), "torch"),
        (
            ModuleNotFoundError("No module named 'qdrant_client'", name="qdrant_client"),
            "qdrant-client",
        ),
        (ModuleNotFoundError("No module named 'openvino'", name="openvino.runtime"), "openvino"),
        (ImportError("jinja2 must be installed to use Jinja2Templates"), "ui"),
        (ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn"), "ui"),
    ],
)
def test_an_extras_import_error_names_the_extra_and_exits_1(exc: ImportError, extra: str) -> None:
    result = CliRunner().invoke(_failing(exc))
    assert result.exit_code == 1, result.output
    assert f"needs the {extra} extra: `pip install 'ingestd[{extra}]'`" in result.output
    assert f"`pip install '.[{extra}]'`" in result.output
    assert "unexpected" not in result.output


def test_a_missing_dependency_says_the_install_is_incomplete() -> None:
    exc = ModuleNotFoundError("No module named 'yaml'", name="yaml")
    result = CliRunner().invoke(_failing(exc))
    assert result.exit_code == 1, result.output
    assert "No module named 'yaml': ingestd's install is incomplete" in result.output
    assert "unexpected" not in result.output


def test_an_import_error_inside_a_module_that_is_there_stays_unexpected() -> None:
    result = CliRunner().invoke(_failing(ImportError("cannot import name 'x' from 'y'")))
    assert result.exit_code == 3
    assert "unexpected error: ImportError" in result.output


def test_each_extra_of_the_table_is_one_of_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert set(EXTRA_MODULES) <= set(project["optional-dependencies"])
