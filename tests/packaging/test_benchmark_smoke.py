"""Benchmarks with a smoke mode run it here, so a broken assumption fails the suite.

A smoke run uses tiny sizes and the session's small prepared data, and stops with an error
when what the benchmark measures no longer matches what the code does (for the compressor
comparison: the bytes it hands the compressors are not the run's own budget bytes).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _smoke(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--smoke", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    return done.stdout


def test_compressor_benchmark_compares_the_runs_own_bytes(prepared_data):
    out = _smoke("baseline_vs_compressors.py", "--data-root", str(prepared_data))
    line = next(x for x in out.splitlines() if x.startswith("the run's bytes:"))
    assert int(line.rsplit("=", 1)[1].split()[0].replace(",", "")) > 10_000
    rates = {x.split()[0]: float(x.split()[-2]) for x in out.splitlines()
             if x.endswith("bits/byte")}
    assert set(rates) >= {"gzip", "xz"}
    assert all(0 < r < 8 for r in rates.values()), rates
