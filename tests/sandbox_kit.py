"""Helpers for the sandbox tests: tiny settings and the attack/honest fixture bundles."""

from __future__ import annotations

import hashlib

from fixture_bundles import FIXTURES, bundle

from prism_challenge.config import Settings

__all__ = ["BATCH", "FIXTURES", "SEQ_LEN", "STEPS", "bundle", "digest_of", "tiny_settings"]
SEQ_LEN = 32
BATCH = 8
STEPS = 12


def tiny_settings(challenge: dict | None = None, scoring: dict | None = None,
                  **sandbox) -> Settings:
    """The sandbox and verification tests' settings: 12 steps of 8 rows of 32 tokens, and the
    smallest held-out evaluation the other kits use too (256 positions, 4 cuts a row: 64 rows,
    two tasks of 32 rows a cut, 20 task processes an evaluation where 384 positions took 28;
    each task process costs a fork and its start, more than a tiny model's forward)."""
    return Settings(
        challenge={"seq_len": SEQ_LEN, "token_budget": SEQ_LEN * BATCH * STEPS,
                   "deadline_s": 30.0, **(challenge or {})},
        sandbox={"cpu_threads": 1, "memory_bytes": 3 * 2**30, "pids_max": 64,
                 "disk_bytes": 64 * 2**20, "output_bytes": 16384, "startup_grace_s": 60.0,
                 "save_grace_s": 3.0, "eval_time_s": 120.0, **sandbox},
        scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4, **(scoring or {})},
        verification={"snapshot_steps": 2},
    )


def digest_of(files: dict[str, bytes]) -> str:
    return hashlib.sha256(b"".join(files[k] for k in sorted(files))).hexdigest()
