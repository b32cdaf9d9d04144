"""The order in which the feeder serves the budget's rows: a lane interleave.

The budget's rows are cut into `lanes` contiguous stretches of text, and the stream takes
one row from each lane in turn. Two properties follow, and both are defences:

- rows next to each other in the text are never in one batch (a batch holds at most one
  row per lane, and a step may take at most `max_step_rows` rows), so no row can read its
  neighbour's tokens, including the one token neighbours share;
- a row is always served before its continuation, so the text after a target is never
  shown before that target is predicted. A random permutation would break this: a model
  would see the continuation of the text it must predict later.

Where one lane ends and the next begins, the next lane's first row is served long before
the previous lane's last row; the one target they share (the last target of a lane) is
therefore never scored. `unscored()` lists those rows.

Every run (and every replay of it) sees the same order: it depends only on the budget and
the lane count, both challenge settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class LaneOrder:
    budget_rows: int
    lanes: int

    def __post_init__(self) -> None:
        if self.budget_rows < 1 or self.lanes < 1:
            raise ValueError("budget_rows and lanes must be positive")

    @property
    def lane_rows(self) -> int:
        """Rows in each lane (the last lane may hold fewer). At least two: with one row per
        lane, neighbouring rows would sit in neighbouring lanes and be served together."""
        return max(math.ceil(self.budget_rows / self.lanes), min(2, self.budget_rows))

    @property
    def used_lanes(self) -> int:
        return math.ceil(self.budget_rows / self.lane_rows)

    @property
    def max_step_rows(self) -> int:
        """The most rows one step (all ranks together) may take: fewer than the lanes that
        are still open at the end, so no batch ever holds two rows of one lane."""
        return max(1, self.used_lanes - 1)

    @cached_property
    def order(self) -> np.ndarray:
        """order[q] = the row served at stream position q."""
        idx, lane = np.meshgrid(np.arange(self.lane_rows), np.arange(self.used_lanes),
                                indexing="ij")
        rows = (lane * self.lane_rows + idx).ravel()
        return rows[rows < self.budget_rows].astype(np.int64)

    def rows_at(self, position: int, count: int) -> np.ndarray:
        """The rows served at stream positions [position, position + count)."""
        if position < 0 or count < 0 or position + count > self.budget_rows:
            raise IndexError(f"stream positions [{position}, {position + count}) outside "
                             f"[0, {self.budget_rows})")
        return self.order[position:position + count]

    @cached_property
    def unscored(self) -> frozenset[int]:
        """Rows whose last target is not scored: the last row of every lane but the last."""
        ends = [(lane + 1) * self.lane_rows - 1 for lane in range(self.used_lanes - 1)]
        return frozenset(r for r in ends if r + 1 < self.budget_rows)
