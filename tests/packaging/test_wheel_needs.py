"""The offline install kit carries only what the GPU host lacks: the lock's pins, less the
host's own packages (by normalised name), the skipped ones and never torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "wheel_needs.py"


def _needs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=60)


def test_the_kit_leaves_out_what_the_host_has_and_what_is_skipped(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("# comment\nnumpy==2.4.6\n    # via scipy\ntorch==2.13.0+cpu\n"
                    "Pydantic_Core==2.50.4\nray==2.60.0\nsqlalchemy==2.1.9\n")
    host = tmp_path / "host.txt"
    host.write_text("numpy==2.5.2\ntorch==2.11.0\n")
    done = _needs(str(lock), "--have", str(host), "--skip", "torch ray")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Pydantic_Core==2.50.4", "sqlalchemy==2.1.9"]
    # without a host list only the skipped names go; a local build tag is dropped
    done = _needs(str(lock), "--skip", "ray")
    assert done.stdout.split() == ["numpy==2.4.6", "torch==2.13.0", "Pydantic_Core==2.50.4",
                                   "sqlalchemy==2.1.9"]


def test_a_missing_host_list_says_how_to_make_it(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==2.4.6\n")
    done = _needs(str(lock), "--have", str(tmp_path / "host.txt"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == ("error: no file " + str(tmp_path / "host.txt") + ": on the "
                                   "host run `python3 -m pip list --format=freeze > host.txt`")


def test_the_real_lock_never_ships_torch_or_the_development_tools():
    dev = "torch pip setuptools ruff pip-tools import-linter grimp schemathesis"
    done = _needs(str(ROOT / "requirements.lock"), "--skip", dev)
    names = {line.split("==")[0].lower() for line in done.stdout.split()}
    assert "torch" not in names and "ruff" not in names
    assert {"bittensor", "pydantic", "sqlalchemy", "fastapi"} <= names
