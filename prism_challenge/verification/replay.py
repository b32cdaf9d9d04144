"""Contender replay: re-run a scored run and check it where it could not know it would be.

The original run streamed the loss of every position it scored, and the feeder kept those
a secret drew (each position with the same chance). A replay runs the same bundle in an
identical sandbox on the same stream; an honest run is deterministic, so its replay
reproduces every batch's loss. At every step holding a kept position, before the scored
forward, the replay either (1) predicts the kept positions from inputs cut right after
each one, so the target is absent, or (2) at a few of those steps drawn only now, saves a
snapshot from which the eval sandbox (architecture only) does the same and the host
computes the losses itself. Both are compared with what the original run reported for
those positions. A model that read its targets from its input when it thought it was not
observed reported losses it cannot reproduce without them; it cannot have known which
positions would be checked, because that was decided after it had reported them.
"""

from __future__ import annotations

import math
import secrets

import numpy as np
from pydantic import Field

from prism_challenge.sandbox.eval_server import Task
from prism_challenge.sandbox.feeder import ReplayPlan, Served
from prism_challenge.sandbox.record import ExitReason, Model, RunRecord
from prism_challenge.sandbox.sampling import cut_rows, kept_positions, rounds
from prism_challenge.sandbox.steps import RowsAndNats

REPLAY_VERSION = 1
EXAMPLES = 8


class PositionCheck(Model):
    step: int
    rank: int
    row: int
    position: int
    recorded: float
    recomputed: float


class CheckedPositions(Model):
    """Kept positions re-predicted without their targets, against the original's losses."""

    compared: int = 0
    mismatched: int = 0
    mean_diff: float = 0.0  # mean of (recomputed - recorded), nats
    max_abs_diff: float = 0.0
    ranks: list[int] = []  # the ranks whose positions were compared
    examples: list[PositionCheck] = []  # the first mismatches


class BatchMismatch(Model):
    step: int
    rank: int
    original: float
    replay: float | None


class ReplayRecord(Model):
    version: int = REPLAY_VERSION
    digest: str
    exit_reason: ExitReason
    exit_detail: str = ""
    diverged: str | None = None
    probe_steps: list[int]
    snapshot_steps: list[int]
    last_step: int  # the last step the replay had to reach
    batches_compared: int = 0
    batch_max_rel_diff: float = 0.0
    batch_mismatches: list[BatchMismatch] = []
    batch_mismatch_count: int = 0
    probes: CheckedPositions = CheckedPositions()
    snapshots: CheckedPositions = CheckedPositions()
    missing: list[str] = []
    # the original run's notes of model state kept outside parameters and buffers: a
    # snapshot restores only the state_dict, so such a run's checks are likely to disagree
    state_outside: list[str] = Field([], max_length=8)
    train_s: float = Field(0.0, ge=0)
    eval_s: float = Field(0.0, ge=0)
    probe_s: float = Field(0.0, ge=0)  # estimated time the in-process probes added
    # this host's stack differs from the original run's: the replay cannot judge it
    incomparable: str | None = None


class DrawnPlan(Model):
    """What a replay's plan draws: which steps holding a kept position are snapshotted
    (every other such step is probed, which the record fixes). Drawn once from fresh
    randomness on the first attempt and stored with the verification; every retry reuses
    it, so a replay cut short (by the host, or by a model faking a host fault) meets the
    same checks again: nothing to re-roll, and nothing a later key could re-derive."""

    snapshot_steps: list[int]


def _held_steps(record: RunRecord) -> list[int]:
    cols = record.columns
    return [int(s) for s in np.unique(cols.step[cols.held()])]


def draw_plan(record: RunRecord, *, snapshots: int,
              rng: np.random.Generator | None = None) -> DrawnPlan:
    """Draw `snapshots` of the steps holding a kept position (fresh randomness unless
    `rng` is given)."""
    held = _held_steps(record)
    rng = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    chosen = rng.choice(held, size=min(snapshots, len(held)), replace=False) if held else []
    return DrawnPlan(snapshot_steps=sorted(int(s) for s in chosen))


def choose_checks(record: RunRecord, drawn: DrawnPlan) -> ReplayPlan:
    """Every step that holds a kept position is checked: the drawn ones are snapshotted,
    every other one is probed. Positions were kept with one fixed chance each, so the
    checks per token do not depend on how the miner cut its steps."""
    original = RowsAndNats(record.columns)
    held = frozenset(_held_steps(record))
    snaps = frozenset(drawn.snapshot_steps)
    if not snaps <= held:
        raise ValueError(f"the stored replay plan snapshots steps {sorted(snaps - held)[:5]} "
                         "that hold no kept position of this record; it belongs to another "
                         "run")
    return ReplayPlan(original, held - snaps, snaps)


class PositionTally:
    """Accumulates position comparisons into a `CheckedPositions`."""

    def __init__(self, abs_tol: float, rel_tol: float) -> None:
        self.abs_tol, self.rel_tol = abs_tol, rel_tol
        self.diffs: list[float] = []
        self.examples: list[PositionCheck] = []
        self.mismatched = 0
        self.ranks: set[int] = set()

    def add(self, step: int, rank: int, row: int, position: int, recorded: float,
            recomputed: float) -> None:
        diff = recomputed - recorded
        self.ranks.add(rank)
        if not math.isfinite(diff):
            diff = math.inf
        self.diffs.append(diff)
        if not abs(diff) <= self.abs_tol + self.rel_tol * abs(recorded):
            self.mismatched += 1
            if len(self.examples) < EXAMPLES:
                self.examples.append(PositionCheck(step=step, rank=rank, row=row,
                                                   position=position, recorded=recorded,
                                                   recomputed=recomputed))

    def result(self) -> CheckedPositions:
        if not self.diffs:
            return CheckedPositions()
        finite = all(math.isfinite(d) for d in self.diffs)
        return CheckedPositions(
            compared=len(self.diffs), mismatched=self.mismatched,
            mean_diff=float(np.mean(self.diffs)) if finite else math.inf,
            max_abs_diff=float(np.max(np.abs(self.diffs))) if finite else math.inf,
            ranks=sorted(self.ranks), examples=self.examples)


def compare_probes(record: RunRecord, served: list[Served], tally: PositionTally,
                   missing: list[str]) -> None:
    """The replay's in-process target-absent losses against the original's kept losses."""
    secret = bytes.fromhex(record.sample_secret)
    kept = _kept(record)
    for s in served:
        if not s.probe_asked:
            continue
        if s.probed is None:
            missing.append(f"no probe answer for step {s.step} rank {s.rank}")
            continue
        rows, pos = kept_positions(secret, s.position, len(s.rows), record.seq_len,
                                   record.keep_rate)
        recorded = kept(s.step, s.rank)
        if len(s.probed) != len(rows) or len(recorded) != len(rows):
            missing.append(f"step {s.step} rank {s.rank}: {len(s.probed)} probe answers, "
                           f"{len(recorded)} kept losses, {len(rows)} positions")
            continue
        for i, (r, p) in enumerate(zip(rows.tolist(), pos.tolist(), strict=True)):
            if s.scored[r, p]:
                tally.add(s.step, s.rank, r, p, recorded[i], s.probed[i])


def snapshot_tasks(record: RunRecord, served: list[Served], stream, names: dict,
                   separator_id: int):
    """Eval tasks that re-predict each snapshot step's kept positions without targets."""
    secret = bytes.fromhex(record.sample_secret)
    for s in served:
        name = names.get((s.step, s.rank))
        if name is None:
            continue
        rows, pos = kept_positions(secret, s.position, len(s.rows), record.seq_len,
                                   record.keep_rate)
        block = stream.rows_at(record.seq_len, s.rows)
        for group in rounds(rows, pos):  # each row cut once per task
            g = np.array(group, dtype=np.int64)
            keep = s.scored[rows[g], pos[g]]
            inputs = cut_rows(block[:, :-1], rows[g], pos[g], separator_id)
            yield Task("logits", "snapshot", inputs, mode="train", snapshot=name,
                       targets=block[rows[g], pos[g] + 1][keep],
                       select_rows=rows[g][keep].tolist(),
                       select_positions=pos[g][keep].tolist(),
                       tag=(s.step, s.rank, g[keep].tolist()))


def compare_snapshots(record: RunRecord, answers, tally: PositionTally) -> None:
    """The eval sandbox's target-absent losses from snapshots against the kept losses."""
    kept = _kept(record)
    for answer in answers:
        step, rank, indices = answer.task.tag
        recorded = kept(step, rank)
        for k, i in enumerate(indices):
            if i < len(recorded):
                tally.add(step, rank, answer.task.select_rows[k],
                          answer.task.select_positions[k], recorded[i], float(answer.nats[k]))


def _kept(record: RunRecord):
    """(step, rank) -> the original's kept losses at that batch ([] when none)."""
    cols = record.columns

    def kept(step: int, rank: int) -> list[float]:
        at = cols.find(step, rank)
        return [] if at is None else cols.samples(at)
    return kept


def compare_batches(record: RunRecord, served: list[Served], rel_tol: float) -> dict:
    """Every batch both runs reported: the replay's loss against the original's."""
    cols = record.columns
    worst, mismatches, count, compared = 0.0, [], 0, 0
    for s in served:
        if s.nats is None:
            continue
        at = cols.find(s.step, s.rank)
        if at is None:
            continue
        want = float(cols.nats[at])
        compared += 1
        rel = abs(s.nats - want) / max(abs(want), 1e-9)
        if not math.isfinite(rel):
            rel = math.inf
        worst = max(worst, rel)
        if not rel <= rel_tol:
            count += 1
            if len(mismatches) < EXAMPLES:
                mismatches.append(BatchMismatch(step=s.step, rank=s.rank, original=want,
                                                replay=s.nats))
    return {"batches_compared": compared, "batch_max_rel_diff": worst,
            "batch_mismatches": mismatches, "batch_mismatch_count": count}


def probe_seconds(served: list[Served]) -> float:
    """What the probes added to the replay's training time: each probed step's duration
    (loss to loss) beyond the median duration of the steps that were not probed."""
    timed = sorted((s.step, s.t, s.probe_asked or s.snapshot_asked) for s in served
                   if s.rank == 0 and s.t is not None)
    steps = [(b[1] - a[1], b[2]) for a, b in zip(timed, timed[1:], strict=False)]
    plain = sorted(d for d, checked in steps if not checked)
    if not plain:
        return 0.0
    typical = plain[len(plain) // 2]
    return sum(max(0.0, d - typical) for d, checked in steps if checked)
