"""Where a run stands, as the runner sees it while a sandbox runs.

The runner polls its sandboxes (about twice a second) and hands one `RunProgress` to its
`on_progress` callback each time: the training or replay phase counts stream rows served
and carries the latest reported batch loss; an evaluation phase counts held-out positions
answered and their running loss. `prism eval` turns these into a live bar or, off a
terminal, into one line at a bounded interval (`miner/progress.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# Off a terminal a progress line is printed at least this often (seconds), in every phase.
MAX_INTERVAL_S = 10.0

# The phases a run goes through, in order (the replay's only for a contender).
TRAINING = "training"
HELDOUT = "held-out evaluation"
REPLAY = "replay"
REPLAY_EVAL = "replay evaluation"


@dataclass(frozen=True)
class RunProgress:
    phase: str  # one of the names above
    done: int  # rows served (training, replay), positions or tasks answered (evaluation)
    total: int | None  # what `done` runs to; None when not known in advance
    unit: str  # "rows", "positions" or "tasks"
    tokens: int  # tokens handed out (training, replay) or positions scored (evaluation)
    loss: float | None = None  # nats per scored token: the latest batch, or the running mean
    step: int | None = None  # the latest step whose loss was reported


ProgressCallback = Callable[[RunProgress], None]


def ignore(_progress: RunProgress) -> None:
    """The default callback: nobody is watching."""
