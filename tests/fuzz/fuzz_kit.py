"""What the fuzzing tests share: how hard they search, and the files of a valid bundle.

The search is bounded and derandomised, so `make test` stays inside its time budget and fails
the same way on every machine. `FUZZ_SCALE=20 pytest tests/fuzz` searches twenty times deeper
(still derandomised); `FUZZ_RANDOM=1` draws new random examples.
"""

from __future__ import annotations

import os

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
