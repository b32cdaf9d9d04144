"""The harness's deterministic mode sets what `torch.use_deterministic_algorithms` sets (the
global flag, strict, and inductor's own flag) without importing inductor at start-up; each
case runs in a fresh interpreter, as a sandbox does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
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


def _probe(strict: bool, before: str = "") -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE.format(strict=strict, before=before)],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("strict", [True, False])
def test_the_mode_is_set_without_importing_inductor(strict):
    assert _probe(strict) == {"flag": strict, "warn_only": False, "inductor_imported": False,
                              "inductor": strict, "before_compile": strict}


def test_an_inductor_imported_before_gets_the_flag_on_its_config():
    seen = _probe(True, before="import torch._inductor.config")
    assert (seen["inductor_imported"], seen["inductor"], seen["flag"]) == (True, True, True)
