"""Production-scale simulation of the contender replay's catch rate, per miner schedule.

A run of `tokens` tokens at `seq_len` is cut into steps by a schedule the miner chooses;
the peeker reads its targets at every position of some whole steps (about `peek` of all
tokens). The simulation runs the project's own parts on it: the feeder's per-position keep
draw (`sampling.kept_counts`, over the whole stream at once: counter mode by stream
position, so it equals the per-batch draws), the replay's chooser (`replay.choose_checks`)
and the verdict (`scoring.verification.verdict`). What it assumes: every kept position in
a peeked row disagrees (a read target costs ~0 nats, 4.5-7 nats without it: measured in the
sandbox tests; `peek_nats` is the gap used for the mean), and an honest position disagrees
with chance `honest_mismatch` (0 measured in 6,320 honest positions, see docs/security.md).
Imported by `probe_catch_rate.py --schedule`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prism_challenge.config.settings import VerificationSettings
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.sandbox.sampling import keep_rate, kept_counts
from prism_challenge.sandbox.steps import StepColumns
from prism_challenge.verification.replay import (
    CheckedPositions,
    ReplayRecord,
    choose_checks,
    draw_plan,
)
from prism_challenge.verification.verdict import verdict

SCHEDULES = ("uniform", "bigstep", "mixed")


@dataclass(frozen=True)
class Schedule:
    rows: np.ndarray  # rows per step
    peeked: np.ndarray  # bool per step: every position of the step is read ahead


def schedule(name: str, total_rows: int, peek: float, rng: np.random.Generator,
             one_row_steps: int = 200_000, peeked_bigsteps: int = 40) -> Schedule:
    """uniform: 16-row steps; bigstep: 255-row steps; mixed: `one_row_steps` one-row steps
    then 255-row steps, of which `peeked_bigsteps` are fully peeked (what the old per-step
    chooser missed most). uniform and bigstep peek whole steps drawn at random until
    `peek` of the rows are read."""
    if name == "uniform":
        rows = _steps(total_rows, 16)
    elif name == "bigstep":
        rows = _steps(total_rows, 255)
    elif name == "mixed":
        ones = min(one_row_steps, total_rows)
        rows = np.concatenate([np.ones(ones, dtype=np.int64), _steps(total_rows - ones, 255)])
    else:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    peeked = np.zeros(len(rows), dtype=bool)
    if name == "mixed":
        big = np.flatnonzero(rows == 255)
        peeked[rng.choice(big, size=min(peeked_bigsteps, len(big)), replace=False)] = True
    elif peek > 0:
        n = min(len(rows), math.ceil(peek * total_rows / int(rows[0])))
        peeked[rng.choice(len(rows), size=n, replace=False)] = True
    return Schedule(rows, peeked)


def _steps(total: int, size: int) -> np.ndarray:
    full, rest = divmod(total, size)
    return np.array([size] * full + ([rest] if rest else []), dtype=np.int64)


def _checked(compared: int, mismatched: int, gap_nats: float) -> CheckedPositions:
    mean = mismatched * gap_nats / compared if compared else 0.0
    return CheckedPositions(compared=compared, mismatched=mismatched, mean_diff=mean,
                            max_abs_diff=gap_nats if mismatched else 0.0, ranks=[0])


def trial(sched: Schedule, seq_len: int, settings: VerificationSettings,
          rng: np.random.Generator, honest_mismatch: float, peek_nats: float
          ) -> tuple[bool, bool, int]:
    """One run and its replay: (the peeker passes, the honest twin passes, positions
    checked). Both share the secret and the plan: only the peeked steps differ."""
    total_rows = int(sched.rows.sum())
    rate = keep_rate(settings.kept_positions, total_rows * seq_len, settings.keep_rate_max)
    secret = rng.bytes(32)
    counts = kept_counts(secret, 0, total_rows, seq_len, rate)
    starts = np.concatenate([[0], np.cumsum(sched.rows)[:-1]])
    per_step = np.add.reduceat(counts, starts)
    held = np.flatnonzero(per_step)
    # the record lists the steps that hold a kept position (the chooser draws among those)
    zeros = np.zeros(len(held))
    cols = StepColumns(step=held, rank=zeros, offset_row=starts[held], rows=sched.rows[held],
                       tokens=zeros, bytes=zeros, nats=zeros, t=zeros,
                       sample_start=np.concatenate(([0], np.cumsum(per_step[held]))),
                       sample=np.zeros(int(per_step[held].sum())))
    record = RunRecord.model_construct(steps=cols)
    plan = choose_checks(record, draw_plan(record, snapshots=settings.snapshot_steps, rng=rng))
    assert plan.probe_steps | plan.snapshot_steps == frozenset(held.tolist())
    noise = rng.binomial(per_step, honest_mismatch) if honest_mismatch else 0 * per_step
    peeked = np.where(sched.peeked, per_step, noise)
    outcome = []
    for bad in (peeked, noise):
        parts = []
        for steps in (plan.probe_steps, plan.snapshot_steps):
            idx = np.fromiter(steps, dtype=np.int64, count=len(steps))
            parts.append(_checked(int(per_step[idx].sum()), int(bad[idx].sum()), peek_nats))
        replay = ReplayRecord(digest="sim", exit_reason="ok", probe_steps=[],
                              snapshot_steps=[], last_step=len(sched.rows) - 1,
                              probes=parts[0], snapshots=parts[1])
        outcome.append(verdict(replay, settings).passed)
    return outcome[0], outcome[1], int(per_step.sum())
