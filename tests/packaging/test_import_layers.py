"""The layers of docs/architecture.md hold, and an upward import breaks them.

`make lint` runs the same contracts (pyproject.toml, `[tool.importlinter]`) on the tree; this
test copies the package into a temporary folder, adds one import from a lower layer to a
higher one, and shows the contracts refuse it, naming the import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import prism_challenge

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(prism_challenge.__file__).resolve().parent
LINT = Path(sys.executable).parent / "lint-imports"


def _lint(where: Path) -> subprocess.CompletedProcess:
    assert LINT.exists(), f"{LINT} is missing: install the dev extra (make setup)"
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run([str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                          cwd=where, env=env, capture_output=True, text=True, timeout=120)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(PACKAGE, tmp_path / "prism_challenge",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return tmp_path


def test_the_tree_keeps_every_contract(tmp_path):
    out = _lint(_copy(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 3 kept, 0 broken." in out.stdout


def test_an_upward_import_breaks_the_layers(tmp_path):
    where = _copy(tmp_path)
    scoring = where / "prism_challenge" / "scoring" / "score.py"
    scoring.write_text(scoring.read_text() + "\nimport prism_challenge.validator.node  # up\n")
    out = _lint(where)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "layers point down BROKEN" in out.stdout
    assert "prism_challenge.scoring.score -> prism_challenge.validator.node" in out.stdout


def test_a_feature_imported_by_the_http_toolkit_breaks_its_contract(tmp_path):
    where = _copy(tmp_path)
    deps = where / "prism_challenge" / "api" / "errors.py"
    deps.write_text(deps.read_text() + "\nimport prism_challenge.intake.routes  # a feature\n")
    out = _lint(where)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "the HTTP toolkit imports no feature BROKEN" in out.stdout
