"""Helpers for the miner-loop tests: a tiny config and the `prism` CLI as a subprocess."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from cli_kit import prism_in_process  # noqa: F401 (the miner tests import it from here)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GUIDE = ROOT / "docs" / "miners.md"
RUN = {"check", "eval"}  # the guide's commands that run here for real
EXAMPLE_NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "training.py").is_file())
SEQ_LEN = 32
BUDGET_ROWS = 96  # the full `prism eval` budget: 6 baseline steps of 16 rows

TINY_CONFIG = f"""\
challenge:
  seq_len: {SEQ_LEN}
  token_budget: {SEQ_LEN * BUDGET_ROWS}
  deadline_s: 60
scoring:
  heldout_positions: 256
  heldout_cuts_per_row: 4
verification:
  snapshot_steps: 2
sandbox:
  cpu_threads: 1
  memory_bytes: 3221225472
  pids_max: 64
  disk_bytes: 67108864
  output_bytes: 16384
  startup_grace_s: 60
  save_grace_s: 3
  eval_time_s: 120
"""


def write_tiny_config(path: Path) -> Path:
    path.write_text(TINY_CONFIG)
    return path


def prism(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
          timeout: float = 240) -> subprocess.CompletedProcess:
    """Run `prism ARGS` for real (a fresh process), with wide output so nothing wraps."""
    return subprocess.run(
        [sys.executable, "-m", "prism_challenge.cli", *args], capture_output=True, text=True,
        cwd=cwd, env={**os.environ, "COLUMNS": "400", **(env or {})}, timeout=timeout,
    )


def copy_example(name: str, dest: Path) -> Path:
    shutil.copytree(EXAMPLES / name, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def guide_commands(guide: Path = GUIDE) -> list[list[str]]:
    """Every `prism ...` line of the guide's bash blocks, split as a shell would."""
    text = guide.read_text().replace("\\\n", " ")  # join continued lines
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [ln.strip() for block in blocks for ln in block.splitlines()]
    return [shlex.split(ln, comments=True) for ln in lines if ln.startswith("prism ")]


def run_guide(folder: Path, config: Path, data_root: Path) -> list:
    """Run docs/miners.md's `prism check` and `prism eval` lines verbatim in `folder` (a copy
    of examples/ beside them): [(argv, completed process)] in the guide's order."""
    shutil.copytree(EXAMPLES, folder / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PRISM_CONFIG": str(config), "PRISM_DATA__ROOT": str(data_root)}
    return [(argv, prism(*argv[1:], cwd=folder, env=env))
            for argv in guide_commands() if argv[1] in RUN]
