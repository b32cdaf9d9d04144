"""The early-stop bound on hand-built curves: who is stopped, where, and who never is."""

from __future__ import annotations

import math

import pytest

from prism_challenge.config import Settings
from prism_challenge.sandbox.early_stop import (
    EarlyStopPlan,
    LeaderCurve,
    checkpoint_positions,
    judge,
    replay_curve,
)

ROWS = 100  # 100 batches of one row; each row: 100 scored tokens over 400 bytes
BYTES = 400 * ROWS
UNIFORM = math.log(512)  # nats per token of a know-nothing model
LN2 = math.log(2)


def leader_loss(i: int) -> float:
    """A production-like leader: from uniform quickly down to a quarter of it (nats per
    token; on FineWeb-Edu, ~0.9 bpb of a uniform ~3.4)."""
    return UNIFORM * (0.25 + 0.75 * math.exp(-i / 3))


def batches(loss) -> list[tuple[int, int, float]]:
    return [(i, 1, 100 * loss(i)) for i in range(ROWS)]


def bpb(curve) -> float:
    return sum(n for _, _, n in curve) / LN2 / BYTES


LEADER = batches(leader_loss)


def plan(*, max_gain: float = 0.5, margin: float = 0.005) -> EarlyStopPlan:
    return EarlyStopPlan(target_bpb=(1 - margin) * bpb(LEADER),
                         leader=LeaderCurve.from_batches(LEADER, ROWS), leader_id=7,
                         checkpoints=checkpoint_positions([0.2, 0.4, 0.6, 0.8], ROWS),
                         max_gain=max_gain, budget_bytes=BYTES, recent_rows=5)


def late_dropper(p: EarlyStopPlan, wait: int) -> tuple[float, list]:
    """Flat at the know-nothing loss for `wait` rows, then better than the leader on every
    later byte by the least gain that ends 1% under the bar."""
    leader_rest = sum(n for _, _, n in LEADER[wait:]) / LN2
    gain = 1 - 0.99 * (p.target_bpb * BYTES - wait * 100 * UNIFORM / LN2) / leader_rest
    return gain, batches(lambda i: UNIFORM if i < wait else (1 - gain) * leader_loss(i))


def test_a_model_that_learns_nothing_is_stopped_at_the_first_checkpoint():
    decision = replay_curve(plan(), batches(lambda i: UNIFORM))
    assert decision is not None and decision.stop
    assert (decision.checkpoint, decision.position) == (0, 20)
    # bits so far + half the leader's bits on the rest, over the budget's bytes
    rest = sum(n for _, _, n in LEADER[20:]) / LN2
    assert decision.bound_bpb == pytest.approx((20 * 100 * UNIFORM / LN2 + 0.5 * rest) / BYTES)
    assert decision.bound_bpb > plan().target_bpb


def test_the_leader_run_again_is_never_stopped():
    assert replay_curve(plan(), LEADER) is None
    noisy = [(o, r, n * (1.01 if o % 2 else 0.99)) for o, r, n in LEADER]
    assert replay_curve(plan(), noisy) is None


@pytest.mark.parametrize("wait", [2, 5, 10, 15])
def test_a_late_dropper_that_would_lead_is_never_stopped(wait):
    """A long warm-up, then a model better than the leader (within `max_gain`)."""
    p = plan()
    gain, curve = late_dropper(p, wait)
    assert 0 < gain < p.max_gain
    assert bpb(curve) < p.target_bpb  # a future leader
    assert replay_curve(p, curve) is None


def test_a_late_dropper_already_dropping_at_a_checkpoint_is_left_to_finish():
    """Even when it needs more than `max_gain`: it beats the leader on the stretch before
    every checkpoint, so no bound is trusted to stop it."""
    p = plan(max_gain=0.2)
    gain, curve = late_dropper(p, 15)
    assert gain > p.max_gain and bpb(curve) < p.target_bpb
    assert replay_curve(p, curve) is None
    _, flat_at_20 = late_dropper(p, 20)  # still flat at the checkpoint: stopped there
    assert replay_curve(p, flat_at_20).position == 20


def test_a_run_beating_the_leader_since_the_last_checkpoint_is_left_to_finish():
    p = plan(max_gain=0.05)
    leader_window = p.leader.bits_before(40) - p.leader.bits_before(20)
    behind = p.target_bpb * BYTES  # far behind: the bound is over the target
    ahead = judge(p, 1, 40, behind, 0.9 * leader_window, 20)
    assert not ahead.stop and ahead.reason == "beating the leader on the latest stretch"
    assert ahead.bound_bpb > p.target_bpb
    assert judge(p, 1, 40, behind, 1.01 * leader_window, 20).stop


def test_a_mediocre_run_is_stopped_later_the_larger_max_gain():
    worse = batches(lambda i: 1.3 * leader_loss(i))
    positions = [replay_curve(plan(max_gain=q), worse).position for q in (0.1, 0.5, 0.9)]
    assert positions == [20, 60, 80]


def test_non_finite_losses_are_left_to_the_gates():
    assert replay_curve(plan(), batches(lambda i: math.nan)) is None


def test_a_leader_curve_must_tile_the_budget():
    assert LeaderCurve.from_batches(LEADER[:-1], ROWS) is None  # the budget not consumed
    assert LeaderCurve.from_batches(LEADER[:5] + LEADER[6:], ROWS) is None  # a gap
    assert LeaderCurve.from_batches([(0, ROWS, math.inf)], ROWS) is None
    curve = LeaderCurve.from_batches(list(reversed(LEADER)), ROWS)
    assert curve.bits_before(0) == 0.0
    assert curve.bits_before(ROWS) == pytest.approx(curve.total)
    half = LEADER[0][2] / LN2 / 2
    assert LeaderCurve.from_batches(LEADER, ROWS).bits_before(0.5) == pytest.approx(half)


def test_checkpoints_are_rows_inside_the_budget():
    assert checkpoint_positions([0.8, 0.2, 0.2, 0.4], 96) == (20, 39, 77)
    assert checkpoint_positions([0.001], 10) == (1,)


@pytest.mark.parametrize("bad", [[0.0], [1.0], [0.5, 1.2]])
def test_checkpoints_must_be_fractions(bad):
    with pytest.raises(ValueError, match="early_stop.checkpoints must be fractions"):
        Settings(scoring={"early_stop": {"checkpoints": bad}})
