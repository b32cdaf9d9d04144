"""The harness's deterministic mode sets what `torch.use_deterministic_algorithms` sets (the
global flag, strict, and inductor's own flag) without importing inductor at start-up; each
case runs in a process that has imported torch and nothing else, as a sandbox's program
starts: one interpreter imports torch once and forks a process for each case (a fork of an
interpreter that imported torch is how the prewarmed sandboxes start, too)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CASE = """
import json, os, sys
import torch
from prism_challenge.sandbox.harness.seeding import deterministic_algorithms, inductor_deterministic
{before}
deterministic_algorithms({strict})
seen = {{"flag": torch.are_deterministic_algorithms_enabled(),
        "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "inductor_imported": "torch._inductor.config" in sys.modules}}
import torch._inductor.config as config
seen["inductor"] = config.deterministic
config.deterministic = not config.deterministic  # a stale value: the compile path resets it
inductor_deterministic()
seen["before_compile"] = config.deterministic
print(json.dumps(seen))
"""

# Imports torch (and nothing of PRISM's nor inductor), then runs each case in a fork of
# itself: one line of JSON a case, in order; a case that fails prints its traceback instead.
FORKS = """
import json, os, sys, traceback
import torch  # noqa: F401 - what every case starts with
assert "torch._inductor.config" not in sys.modules
for code in json.loads(sys.argv[1]):
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            exec(compile(code, "<case>", "exec"), {"__name__": "__main__"})
            sys.stdout.flush()
            os._exit(0)
        except BaseException:
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if status:
        sys.exit(f"a case failed (status {status})")
"""

CASES = {
    "strict": dict(strict=True, before=""),
    "warn-only": dict(strict=False, before=""),
    "inductor first": dict(strict=True, before="import torch._inductor.config"),
}


@pytest.fixture(scope="module")
def seen() -> dict[str, dict]:
    """What each case saw, by name (one interpreter for all of them)."""
    codes = [CASE.format(**case) for case in CASES.values()]
    done = subprocess.run([sys.executable, "-c", FORKS, json.dumps(codes)],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == len(CASES), done.stdout
    return {name: json.loads(line) for name, line in zip(CASES, lines, strict=True)}


@pytest.mark.parametrize("strict", [True, False])
def test_the_mode_is_set_without_importing_inductor(seen, strict):
    assert seen["strict" if strict else "warn-only"] == {
        "flag": strict, "warn_only": False, "inductor_imported": False, "inductor": strict,
        "before_compile": strict}


def test_an_inductor_imported_before_gets_the_flag_on_its_config(seen):
    case = seen["inductor first"]
    assert (case["inductor_imported"], case["inductor"], case["flag"]) == (True, True, True)
