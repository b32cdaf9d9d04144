"""Every benchmark script still imports against today's code.

Benchmarks are not tests and run rarely (some only on a lent GPU host), so a name they import
can disappear from the package without anything failing; the GPU host benchmark once died at
its first line that way. One subprocess imports each script as a module (its `main()` is not
run) with the paths the scripts expect.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))

IMPORT_ALL = """
import importlib.util, sys, traceback
failed = []
for path in sys.argv[1:]:
    name = "benchmark_" + path.rsplit("/", 1)[-1][:-3]
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        # a script (it has a __main__ block) runs through main(); a shared module of the
        # scripts (catch_sim.py) only has to import
        if "__main__" in open(path).read():
            assert callable(getattr(module, "main", None)), "no main()"
    except BaseException as exc:
        failed.append(f"{path}: {type(exc).__name__}: {exc}")
print("\\n".join(failed) if failed else "all imported")
"""


def test_every_benchmark_script_imports():
    assert len(BENCHMARKS) >= 10, BENCHMARKS
    env_path = f"{ROOT / 'benchmarks'}:{ROOT / 'tests'}:{ROOT}"
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, *map(str, BENCHMARKS)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "all imported", done.stdout
