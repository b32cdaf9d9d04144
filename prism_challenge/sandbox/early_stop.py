"""Early stop of hopeless runs: the bar, fixed by the validator before the run, and the bound.

Every run streams the same text in the same order, so at a stream position the validator
can compare what a run has paid so far with what the leader paid on the very same bytes.
At a checkpoint, with the stream consumed up to position P:

    bound = (bits the run paid on [0, P) + (1 - max_gain) * bits the leader paid on [P, end))
            / bytes of the budget

is the run's final prequential bpb if, on every byte still to come, it were `max_gain`
better than the leader. The run is stopped when even that cannot clear the bar
`(1 - dethrone_margin) * leader bpb` (a run above the bar can never take the lead), and
only if it is not beating the leader on the latest stretch of the stream (a run that has
started to learn fast is left to finish).

Why this is conservative: the bits paid so far are exact (losses are never negative, and
the budget's bytes are the denominator whatever the run does), so the only assumption is
the floor on the rest, and it is stated relative to the leader on identical text, never
extrapolated from the run's own curve: a run that starts slowly (long warm-up,
schedule-free, curriculum, growing models) and drops late looks flat at a checkpoint, and a
fit on its own curve would kill it. To be stopped wrongly, a run must be behind the leader
by enough that it would then have to beat the leader by more than `max_gain` (half, by
default) on every remaining byte. The plan carries no information from the miner: the
target and the leader's curve come from the validator's own store.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from prism_challenge.config.settings import ScoringSettings
    from prism_challenge.sandbox.record import Budget, RunRecord

LN2 = math.log(2.0)


@dataclass(frozen=True)
class LeaderCurve:
    """The leader's bits on the stream, cumulative at batch edges (stream positions)."""

    edges: np.ndarray  # int positions, strictly increasing, edges[0] == 0, edges[-1] == rows
    bits: np.ndarray  # cumulative bits paid on [0, edges[i])

    @classmethod
    def from_batches(cls, batches: Iterable[tuple[int, int, float]], budget_rows: int
                     ) -> LeaderCurve | None:
        """(offset_row, rows, nats) per batch; None unless they tile the whole budget."""
        ordered = sorted(batches)
        edges, bits, pos, total = [0], [0.0], 0, 0.0
        for offset, rows, nats in ordered:
            if offset != pos or rows < 1 or not math.isfinite(nats) or nats < 0:
                return None
            pos += rows
            total += nats / LN2
            edges.append(pos)
            bits.append(total)
        if pos != budget_rows:
            return None
        return cls(np.asarray(edges, dtype=np.int64), np.asarray(bits, dtype=np.float64))

    def bits_before(self, position: int) -> float:
        """Bits paid on [0, position), pro rata by rows inside a batch."""
        return float(np.interp(position, self.edges, self.bits))

    @property
    def total(self) -> float:
        return float(self.bits[-1])


@dataclass(frozen=True)
class EarlyStopPlan:
    """Fixed by the validator before the run starts, from its own store."""

    target_bpb: float  # (1 - dethrone_margin) * the verified leader's bpb
    leader: LeaderCurve
    leader_id: int  # the leader's submission id, for the record
    checkpoints: tuple[int, ...]  # stream positions (rows), increasing
    max_gain: float  # the rest of the run may be this much better than the leader, per byte
    budget_bytes: int
    recent_rows: int = 1  # the stretch before a checkpoint where a run beating the leader
    # is left to finish

    def fits(self, budget_rows: int, budget_bytes: int) -> bool:
        """Whether the plan was made for a run of this budget (a runner checks it before
        using a plan made elsewhere, e.g. by a cluster's head)."""
        return (int(self.leader.edges[-1]), self.budget_bytes) == (budget_rows, budget_bytes) \
            and all(0 < p < budget_rows for p in self.checkpoints)


def plan_early_stop(scoring: ScoringSettings, leader_bpb: float, leader_id: int,
                    leader: RunRecord, *, manifest_sha256: str, lanes: int, budget: Budget
                    ) -> EarlyStopPlan | None:
    """The bar a run on this stream (data version, lane count, budget) must be able to
    clear, from the verified leader's score and record (the validator's own); None when
    early stop is off or the leader's run cannot be compared position by position (another
    manifest, budget or stream order, or it did not consume the whole budget)."""
    cfg = scoring.early_stop
    same_stream = (leader.manifest_sha256 == manifest_sha256 and leader.lanes == lanes
                   and leader.budget == budget)
    if not cfg.enabled or not same_stream or not math.isfinite(leader_bpb):
        return None
    cols = leader.columns
    curve = LeaderCurve.from_batches(zip(cols.offset_row.tolist(), cols.rows.tolist(),
                                         cols.nats.tolist(), strict=True), budget.rows)
    checkpoints = checkpoint_positions(cfg.checkpoints, budget.rows)
    if curve is None or not checkpoints:
        return None
    return EarlyStopPlan(target_bpb=(1.0 - scoring.dethrone_margin) * leader_bpb, leader=curve,
                         leader_id=leader_id, checkpoints=checkpoints, max_gain=cfg.max_gain,
                         budget_bytes=budget.bytes,
                         recent_rows=max(1, math.ceil(cfg.recent * budget.rows)))


@dataclass(frozen=True)
class Decision:
    checkpoint: int  # index into the plan's checkpoints
    position: int  # stream position actually consumed when judged
    bound_bpb: float
    run_bits: float
    stop: bool
    reason: str


def judge(plan: EarlyStopPlan, index: int, position: int, run_bits: float,
          recent_bits: float, recent_start: int) -> Decision:
    """The verdict at a checkpoint, from the run's bits on [0, position) and on
    [recent_start, position)."""
    rest = plan.leader.total - plan.leader.bits_before(position)
    bound = (run_bits + (1.0 - plan.max_gain) * rest) / plan.budget_bytes
    leader_recent = plan.leader.bits_before(position) - plan.leader.bits_before(recent_start)
    if not math.isfinite(run_bits):  # the non-finite gate judges it; no bound to record
        return Decision(index, position, math.nan, run_bits, False, "non-finite losses")
    if bound <= plan.target_bpb:
        return Decision(index, position, bound, run_bits, False, "may still lead")
    if recent_start < position and recent_bits < leader_recent:
        return Decision(index, position, bound, run_bits, False,
                        "beating the leader on the latest stretch")
    return Decision(index, position, bound, run_bits, True,
                    f"bound {bound:.4f} bpb > target {plan.target_bpb:.4f}")


def checkpoint_positions(fractions: Sequence[float], budget_rows: int) -> tuple[int, ...]:
    """Stream positions of the checkpoints (distinct, inside the budget)."""
    out = sorted({int(math.ceil(f * budget_rows)) for f in fractions})
    return tuple(p for p in out if 0 < p < budget_rows)


class Watch:
    """The checkpoints of one run, judged in order as the stream reaches them."""

    def __init__(self, plan: EarlyStopPlan) -> None:
        self.plan = plan
        self.next = 0

    def due(self, position: int) -> bool:
        return self.next < len(self.plan.checkpoints) and \
            position >= self.plan.checkpoints[self.next]

    def check(self, position: int, consumed: Iterable[tuple[int, int, float]]) -> Decision:
        """Judge the due checkpoint; `consumed` holds (offset_row, rows, nats) of every batch
        on [0, position)."""
        consumed = list(consumed)
        bits = math.fsum(n for _, _, n in consumed) / LN2
        recent = [b for b in consumed if b[0] >= position - self.plan.recent_rows]
        start = min((o for o, _, _ in recent), default=position)
        decision = judge(self.plan, self.next, position, bits,
                         math.fsum(n for _, _, n in recent) / LN2, start)
        while self.due(position):
            self.next += 1
        return decision


def replay_curve(plan: EarlyStopPlan, batches: Sequence[tuple[int, int, float]]
                 ) -> Decision | None:
    """Run the checks over a finished run's (offset_row, rows, nats) batches, as the feeder
    would have: the first stopping decision, or None (used by the benchmark and tests)."""
    watch = Watch(plan)
    consumed: list[tuple[int, int, float]] = []
    for batch in sorted(batches):
        consumed.append(batch)
        end = batch[0] + batch[1]
        if watch.due(end):
            decision = watch.check(end, consumed)
            if decision.stop:
                return decision
    return None
