"""The demo corpus reads only distributions that every miner install has.

`make demo` and `prism prepare-data --source demo` build the corpus from the docstrings of
the distributions a shipped data spec names. Each of them must be pinned in
requirements.lock (what `make setup` installs), reachable from the package's base or
`[miner]` requirements (what `pip install prism-challenge[miner]` installs), and installed
here. Dropping one from the lock or from the extra fails this test, not the README's demo.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "data_manifests").glob("*.json"))


def _demo_distributions() -> list[tuple[str, str]]:
    out = []
    for path in SPECS:
        source = json.loads(path.read_text())["source"]
        if source.get("kind") == "demo":
            out += [(path.name, name) for name in source["distributions"]]
    return out


def _locked() -> set[str]:
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", (ROOT / "requirements.lock")
                      .read_text(), flags=re.M)
    return {canonicalize_name(p) for p in pins}


def _miner_closure() -> set[str]:
    """Distributions that base + `[miner]` pull in, walked through installed metadata."""
    todo = []
    for text in metadata.requires("prism-challenge") or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": "miner"}):
            todo.append(req.name)
    seen: set[str] = set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen or name == "prism-challenge":
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def test_a_shipped_spec_builds_the_demo():
    assert _demo_distributions(), "no shipped data spec has a demo source"


@pytest.mark.parametrize(("spec", "name"), _demo_distributions())
def test_every_demo_distribution_is_locked_installed_and_a_miner_dependency(spec, name):
    assert canonicalize_name(name) in _locked(), f"{spec}: {name} is not in requirements.lock"
    assert canonicalize_name(name) in _miner_closure(), (
        f"{spec}: {name} is not installed by prism-challenge[miner]")
    assert metadata.version(name)
