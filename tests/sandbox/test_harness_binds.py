"""A bubblewrap sandbox holds the harness's own modules and nothing else of PRISM.

A real sandbox lists every PRISM file it can see and tries to import the validator's
modules: only the harness (and what it imports) is there, wherever the clone or the
installed package lives.
"""

from __future__ import annotations

import json
import sys

import pytest

from prism_challenge.isolation.bubblewrap import (
    HARNESS_ROOT,
    BubblewrapBackend,
    _package_dir,
    harness_files,
)
from prism_challenge.isolation.spec import Limits, Mount, SandboxSpec, minimal_env

PROBE = f"""
import importlib, json, os
seen = sorted(os.path.relpath(os.path.join(b, n), {HARNESS_ROOT!r})
              for b, _, names in os.walk({HARNESS_ROOT!r}) for n in names)
package = {str(_package_dir())!r}
hidden = sorted(os.listdir(package)) if os.path.isdir(package) else []
imports = {{}}
for name in ("prism_challenge.sandbox.harness.train_main",
             "prism_challenge.sandbox.harness.eval_main",
             "prism_challenge.hardware.health_probe",
             "prism_challenge.sandbox.runner", "prism_challenge.config.settings",
             "prism_challenge.sandbox.heldout"):
    try:
        importlib.import_module(name)
        imports[name] = "ok"
    except ImportError as e:
        imports[name] = type(e).__name__
print(json.dumps({{"seen": seen, "hidden": hidden, "imports": imports}}))
"""


@pytest.fixture(scope="module")
def inside(tmp_path_factory) -> dict:
    scratch = tmp_path_factory.mktemp("scratch")
    spec = SandboxSpec(
        argv=(sys.executable, "-c", PROBE), mounts=(Mount(scratch, "/scratch", writable=True),),
        env=minimal_env(), scratch=scratch,
        limits=Limits(wall_s=120, memory_bytes=2**31, pids_max=64, disk_bytes=2**24,
                      output_bytes=65536))
    result = BubblewrapBackend().run(spec)
    assert result.cause == "ok", result.output
    return json.loads(result.output.strip().splitlines()[-1])


def test_only_the_harness_files_are_visible(inside):
    package = _package_dir()
    expected = sorted(str(("prism_challenge" / f.relative_to(package)).as_posix())
                      for f in harness_files(package))
    assert inside["seen"] == expected
    assert "prism_challenge/sandbox/harness/train_main.py" in inside["seen"]
    assert inside["hidden"] == []  # the installed package's own folder shows nothing


def test_the_harness_imports_and_the_validator_does_not(inside):
    imports = inside["imports"]
    assert imports["prism_challenge.sandbox.harness.train_main"] == "ok"
    assert imports["prism_challenge.sandbox.harness.eval_main"] == "ok"
    assert imports["prism_challenge.hardware.health_probe"] == "ok"
    assert imports["prism_challenge.sandbox.runner"] == "ModuleNotFoundError"
    assert imports["prism_challenge.config.settings"] == "ModuleNotFoundError"
    assert imports["prism_challenge.sandbox.heldout"] == "ModuleNotFoundError"


def test_every_prism_module_a_harness_file_imports_is_bound():
    """Lazy imports too (inside functions): a module the harness reaches at run time but the
    sandbox lacks fails only when that code path runs (a replay's probe, say)."""
    import ast

    package = _package_dir()
    bound = {f.relative_to(package).with_suffix("").as_posix().replace("/", ".")
             for f in harness_files(package)}
    missing = set()
    for f in harness_files(package):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name.startswith("prism_challenge."):
                    rel = name.removeprefix("prism_challenge.")
                    if rel not in bound and f"{rel}.__init__" not in bound:
                        missing.add(f"{f.name} imports {name}")
    assert missing == set()
