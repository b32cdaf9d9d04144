"""A `[miner]` install reaches everything `prism check` and `prism eval` import.

A subprocess refuses every module of the `[validator]` extra (as an install without it
would), then imports the miner's entry points and runs the static findings on a shipped
example: nothing there may need openai (the gates' reviewer) or scipy (the registry's
posteriors).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from prism_challenge.extras import MODULE_EXTRAS

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR_ONLY = sorted(m for m, (extra, _) in MODULE_EXTRAS.items() if extra != "miner")

PROBE = """
import importlib.abc, sys
BLOCK = set(sys.argv[1].split(","))
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCK:
            raise ModuleNotFoundError(f"not installed: {name}")
sys.meta_path.insert(0, Refuse())
from prism_challenge.bundle import Bundle
from prism_challenge.cli import check_cmd, eval_cmd
from prism_challenge.miner import evaluate_bundle, check_bundle
from prism_challenge.miner.findings import static_findings
bundle = Bundle.from_dir(sys.argv[2])
print(len(static_findings(bundle)), sorted(set(sys.modules) & BLOCK))
"""


def test_check_and_eval_import_without_the_validator_extra():
    assert {"openai", "scipy"} <= set(VALIDATOR_ONLY)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(VALIDATOR_ONLY), str(ROOT / "examples/baseline")],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "[]"
