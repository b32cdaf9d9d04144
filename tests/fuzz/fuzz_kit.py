"""What the fuzzing tests share: how hard they search, and the files of a valid bundle.

The search is bounded and derandomised, so `make test` stays inside its time budget and fails
the same way on every machine. `FUZZ_SCALE=20 pytest tests/fuzz` searches twenty times deeper
(still derandomised); `FUZZ_RANDOM=1` draws new random examples.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import bittensor
from hypothesis import HealthCheck, settings

SCALE = max(1, int(os.environ.get("FUZZ_SCALE", "1")))
RANDOM = os.environ.get("FUZZ_RANDOM") == "1"

API_EXAMPLES = 25 * SCALE


def budget(examples: int) -> settings:
    return settings(
        max_examples=examples * SCALE,
        deadline=None,  # a shared 2-core machine: time is judged by benchmarks, not here
        derandomize=not RANDOM,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


PROPERTY = budget(60)


ARCH = b"import torch\n\n\ndef build_model(ctx):\n    return torch.nn.Linear(4, 4)\n"
TRAIN = b"def train(ctx):\n    for batch in ctx.batches(8):\n        batch.loss.backward()\n"


def valid_files(tag: str = "") -> dict[str, bytes]:
    """The files of a valid bundle; a different `tag` gives a different digest."""
    return {"architecture.py": ARCH, "training.py": TRAIN + f"# {tag}\n".encode()}


def make_wallet(root: Path, name: str) -> bittensor.Wallet:
    """A real bittensor wallet whose hotkey (sr25519) signs requests."""
    wallet = bittensor.Wallet(name=name, hotkey="default", path=str(root))
    wallet.create_new_hotkey(use_password=False, overwrite=True, suppress=True)
    return wallet


class CommitCounter:
    """SQLite's commit counter (`PRAGMA data_version`) read on a connection of its own: the
    value moves iff another connection committed, so an unchanged value proves that nothing
    was written. The counter is per connection: read on a fresh connection each time it
    would never move, and a check built on that could not fail."""

    def __init__(self, db: Path) -> None:
        self._conn = sqlite3.connect(db, check_same_thread=False)

    def __call__(self) -> int:
        return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def close(self) -> None:
        self._conn.close()
