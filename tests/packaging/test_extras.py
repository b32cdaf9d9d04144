"""The base package imports without the optional extras, and a command that needs one says so.

A missing extra is simulated at the import seam only: a meta-path finder that refuses the
extra's top-level modules, installed before `prism` starts in a fresh interpreter, exactly
as if those distributions were not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from prism_challenge.cli.app import COMMAND_EXTRAS, app
from prism_challenge.extras import INCLUDES, MODULE_EXTRAS

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
OPTIONAL = PYPROJECT["project"]["optional-dependencies"]

BLOCKER = """
import sys, importlib.abc
blocked = set(sys.argv.pop(1).split(","))
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
sys.argv[0] = "prism"
from prism_challenge.cli.app import main
main()
"""


def modules_of(*extras: str) -> list[str]:
    return sorted(m for m, (extra, _) in MODULE_EXTRAS.items() if extra in extras)


def prism_without(modules: list[str], *args: str, cwd: Path = ROOT):
    return subprocess.run(
        [sys.executable, "-c", BLOCKER, ",".join(modules), *args], capture_output=True,
        text=True, cwd=cwd, env={**os.environ, "COLUMNS": "400"}, timeout=120,
    )


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_module_table_matches_the_extras_in_pyproject():
    for module, (extra, dist) in MODULE_EXTRAS.items():
        assert dist in _names(OPTIONAL[extra]), f"{module}: {dist} is not in [{extra}]"
    for extra in ("miner", "validator", "postgres", "cluster"):
        dists = {r for r in _names(OPTIONAL[extra]) if r != "prism-challenge"}
        tabled = {d for e, d in MODULE_EXTRAS.values() if e == extra}
        assert dists == tabled, extra
    assert "prism-challenge" in _names(OPTIONAL["validator"])  # validator includes miner
    assert INCLUDES == {"validator": frozenset({"miner"})}
    dev = {Requirement(r) for r in OPTIONAL["dev"]}
    everything = next(r for r in dev if r.name == "prism-challenge")
    assert everything.extras == {"miner", "validator", "postgres", "cluster"}


def test_every_command_declares_its_extra():
    commands = ({c.name for c in app.registered_commands}
                | {g.name for g in app.registered_groups})
    assert set(COMMAND_EXTRAS) <= commands
    assert commands - set(COMMAND_EXTRAS) == {"config", "examples"}  # the base package only


def test_base_install_runs_the_cli_shell(tmp_path):
    every = modules_of("miner", "validator", "postgres", "cluster")
    res = prism_without(every, "--help")
    assert res.returncode == 0, res.stderr
    for command in ("check", "eval", "validator", "examples", "config"):
        assert command in res.stdout
    res = prism_without(every, "config")
    assert res.returncode == 0 and "storage:" in res.stdout, res.stderr
    res = prism_without(every, "examples", "copy", "baseline", str(tmp_path / "b"))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "b" / "training.py").is_file()


@pytest.mark.parametrize(("blocked", "argv", "extra"), [
    (("miner", "validator"), ["check", "examples/baseline"], "miner"),
    (("miner", "validator"), ["prepare-data", "--source", "demo", "--out", "{tmp}/d"], "miner"),
    (("miner", "validator"), ["submit", "examples/baseline"], "miner"),
    (("validator",), ["validator"], "validator"),
    (("miner", "validator"), ["weights"], "validator"),
    (("validator",), ["prepare-data", "--source", "fineweb-edu", "--out", "{tmp}/f",
                      "--no-progress"],
     "validator"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_command_names_the_extra_it_needs(blocked, argv, extra, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    env_cwd = tmp_path
    (env_cwd / "examples").symlink_to(ROOT / "examples")
    res = prism_without(modules_of(*blocked), *argv, cwd=env_cwd)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert f"`prism {argv[0]}` needs the [{extra}] extra" in res.stderr
    assert f"pip install 'prism-challenge[{extra}]'" in res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1  # one line, not wrapped
    assert not (tmp_path / "d").exists() and not (tmp_path / "f").exists()


def test_a_postgres_store_without_the_driver_names_the_postgres_extra(tmp_path):
    env = {"PRISM_STORAGE__URL": "postgresql+psycopg://prism@/prism?host=/nonexistent"}
    res = subprocess.run(
        [sys.executable, "-c", BLOCKER, "psycopg", "program"], capture_output=True, text=True,
        cwd=tmp_path, env={**os.environ, **env, "COLUMNS": "400"}, timeout=120,
    )
    assert res.returncode == 2, res.stderr
    assert "needs the [postgres] extra (module 'psycopg' is not installed)" in res.stderr
