"""The built wheel works outside a clone: data manifests and examples travel with it.

The wheel is built from this checkout and installed (without dependencies) into a fresh
virtual environment that reaches the project environment's packages through a `.pth` line,
so the test installs nothing from an index. Everything then runs from a folder outside the
repository with the installed `prism` script: prepare the demo corpus, copy an example,
`prism check` and `prism eval` it in the real sandbox. Only the sizes are small: the demo
spec shipped in the wheel is trimmed to two distributions, and the budget is a few batches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TINY = {
    "PRISM_CHALLENGE__SEQ_LEN": "32",
    "PRISM_CHALLENGE__TOKEN_BUDGET": str(32 * 96),
    "PRISM_CHALLENGE__DEADLINE_S": "60",
    "PRISM_SCORING__HELDOUT_POSITIONS": "256",
    "PRISM_SCORING__HELDOUT_TWIN_POSITIONS": "64",
    "PRISM_SCORING__HELDOUT_CUTS_PER_ROW": "4",
    "PRISM_VERIFICATION__SNAPSHOT_STEPS": "2",
    "PRISM_SANDBOX__CPU_THREADS": "1",
    "PRISM_SANDBOX__MEMORY_BYTES": str(3 * 2**30),
    "PRISM_SANDBOX__PIDS_MAX": "64",
    "PRISM_SANDBOX__DISK_BYTES": str(64 * 2**20),
    "PRISM_SANDBOX__STARTUP_GRACE_S": "60",
    "PRISM_SANDBOX__EVAL_TIME_S": "120",
}


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess:
    res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "COLUMNS": "400", **(env or {})})
    assert res.returncode == 0, f"{' '.join(argv)}\n{res.stdout}\n{res.stderr}"
    return res


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(out), str(ROOT)], cwd=out)
    (built,) = out.glob("prism_challenge-*.whl")
    return built


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


@pytest.mark.timeout(600)  # five fresh `prism` processes; slow only on a loaded machine
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

    env = {**TINY, "PRISM_DATA__ROOT": "data"}
    check = _run([prism, "check", "mine"], cwd=tmp_path, env=env)
    assert "PASS" in check.stdout
    _run([prism, "eval", "mine", "--out", "out"], cwd=tmp_path, env=env)
    score = json.loads((tmp_path / "out" / "score.json").read_text())
    assert score["score"]["eligible"] is True
    record = json.loads((tmp_path / "out" / "record.json").read_text())
    assert record["corpus"] == "demo" and record["consumed"]["rows"] == 96
