"""Helpers for the sandbox tests: tiny settings and the attack/honest fixture bundles."""

from __future__ import annotations

import hashlib
from pathlib import Path

from prism_challenge.config import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sandbox"
SEQ_LEN = 32
BATCH = 8
STEPS = 12


def tiny_settings(challenge: dict | None = None, **sandbox) -> Settings:
    return Settings(
        challenge={"seq_len": SEQ_LEN, "token_budget": SEQ_LEN * BATCH * STEPS,
                   "deadline_s": 30.0, **(challenge or {})},
        sandbox={"cpu_threads": 1, "memory_bytes": 3 * 2**30, "pids_max": 64,
                 "disk_bytes": 64 * 2**20, "output_bytes": 16384, "startup_grace_s": 60.0,
                 "save_grace_s": 3.0, "eval_time_s": 120.0, **sandbox},
        scoring={"heldout_positions": 384, "heldout_twin_positions": 96,
                 "heldout_cuts_per_row": 4},
        verification={"snapshot_steps": 2},
    )


def bundle(name: str, **substitutions: str) -> dict[str, bytes]:
    """A fixture bundle; files it lacks come from the honest `tiny` bundle."""
    files = {}
    for fname in ("architecture.py", "training.py"):
        path = FIXTURES / name / fname
        if not path.exists():
            path = FIXTURES / "tiny" / fname
        text = path.read_text()
        for key, value in substitutions.items():
            text = text.replace(f"{key} = []", f"{key} = {value}").replace(
                f"{key} = 0", f"{key} = {value}")
        files[fname] = text.encode()
    return files


def digest_of(files: dict[str, bytes]) -> str:
    return hashlib.sha256(b"".join(files[k] for k in sorted(files))).hexdigest()
