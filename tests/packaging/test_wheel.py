"""The built wheel works outside a clone: data manifests and examples travel with it.

The wheel is built from this checkout and installed (without dependencies) into a fresh
virtual environment that reaches the project environment's packages through a `.pth` line,
so the test installs nothing from an index. Everything then runs from a folder outside the
repository with the installed `prism` script: prepare the demo corpus, copy an example,
and list them. (`prism check` and `prism eval` of the copied example, both sandboxes
included, run from an installed wheel in test_miner_install.py.)
Only the sizes are small: the demo spec shipped in the wheel is trimmed to two
distributions.
"""

from __future__ import annotations

import json
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from install_kit import run as _run

ROOT = Path(__file__).resolve().parents[2]

@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A new venv holding only the wheel; its dependencies come from the project venv."""
    venv = tmp_path_factory.mktemp("venv")
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", "--without-pip", str(venv)], cwd=venv)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                      "['purelib'])"], cwd=venv).stdout.strip())
    (site / "project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
          "--no-index", str(wheel)], cwd=venv)
    return venv


def test_wheel_carries_manifests_and_examples(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    share = "prism_challenge/share/"
    for manifest in (ROOT / "data_manifests").glob("*.json"):
        assert f"{share}data_manifests/{manifest.name}" in names
    for example in (ROOT / "examples").iterdir():
        for file in ("architecture.py", "training.py", "prism.toml"):
            if (example / file).is_file():
                assert f"{share}examples/{example.name}/{file}" in names
    assert not any("__pycache__" in n for n in names)


@pytest.mark.timeout(600)  # fresh `prism` processes; slow only on a loaded machine
def test_installed_wheel_runs_the_miner_loop_outside_a_clone(installed, tmp_path):
    prism = str(installed / "bin" / "prism")
    where = _run([str(installed / "bin" / "python"), "-c",
                  "import prism_challenge; print(prism_challenge.__file__)"], cwd=tmp_path)
    assert where.stdout.strip().startswith(str(installed)), where.stdout  # not the checkout
    shipped = Path(where.stdout.strip()).parent / "share" / "data_manifests" / "demo.json"
    spec = json.loads(shipped.read_text())
    spec["source"].update(distributions=["typer", "rich"], min_text_bytes=10_000)
    spec["tokenizer"]["vocab_size"] = 512
    spec["shard_tokens"] = 16_384
    spec["split"].update(train=0.8, val=0.1, test=0.1)
    (tmp_path / "tiny-demo.json").write_text(json.dumps(spec))

    prep = _run([prism, "prepare-data", "--source", "demo", "--manifest", "tiny-demo.json",
                 "--out", "data", "--no-progress"], cwd=tmp_path)
    assert "DEMO" in prep.stdout and (tmp_path / "data" / "MANIFEST.json").is_file()

    listed = _run([prism, "examples", "list"], cwd=tmp_path).stdout
    names = [line.split(":", 1)[0] for line in listed.splitlines() if ": " in line]
    assert names == sorted(p.name for p in (ROOT / "examples").iterdir()
                           if (p / "training.py").is_file())
    _run([prism, "examples", "copy", "baseline", "mine"], cwd=tmp_path)
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == [
        "architecture.py", "prism.toml", "training.py"]
    # `prism check` and `prism eval` of the copied example run from an installed wheel in
    # test_miner_install.py, in an environment that holds the [miner] extra only.
