"""requirements.lock pins everything pyproject.toml asks for, and the CPU torch build only.

`make setup` installs the lock and then the project with `--no-deps`, so a dependency added
to pyproject.toml without `make lock` would silently be missing: this test names it.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"


def locked() -> dict[str, Version]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line)
        if m:
            pins[canonicalize_name(m.group(1))] = Version(m.group(2))
    return pins


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    return [r for r in map(Requirement, reqs) if r.name != "prism-challenge"]


def test_every_declared_requirement_is_pinned_inside_its_range():
    pins = locked()
    problems = []
    for req in declared():
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req.name} is not in requirements.lock")
        elif not req.specifier.contains(pin, prereleases=True):
            problems.append(f"{req.name}=={pin} does not satisfy {req}")
    assert problems == [], "run `make lock`: " + "; ".join(problems)


def test_lock_pins_exact_versions_and_says_how_to_regenerate():
    text = LOCK.read_text()
    assert "#    make lock" in text
    requirement_lines = [ln for ln in text.splitlines() if ln and not ln.startswith(" ")
                         and not ln.startswith("#")]
    assert requirement_lines and all("==" in ln for ln in requirement_lines)


def test_torch_is_the_cpu_build_and_nothing_pulls_cuda():
    pins = locked()
    assert str(pins["torch"]).endswith("+cpu")  # PyPI has no +cpu build: never a CUDA wheel
    assert not [n for n in pins if n.startswith(("nvidia-", "cuda-", "triton"))]


def test_this_environment_was_installed_from_the_lock():
    pins = locked()
    drift = {n: (str(v), metadata.version(n)) for n, v in pins.items()
             if Version(metadata.version(n)) != v}
    assert drift == {}, "the venv differs from requirements.lock: run `make setup`"
