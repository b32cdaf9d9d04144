"""Target-absent held-out evaluation: which val positions are scored, and in what order.

Each scored position p of a val row is predicted from that row with every token after p
replaced by a filler, so the input holds its context and never the token it predicts: no
look-ahead of any kind can lower this score, however the model behaves when it notices it
is being evaluated. It is the reference every other check compares to.

Rows are every other val row (so no two used rows share a token or touch each other), each
cut at a few random positions; a row is shown cut at its positions in increasing order, one
cut per pass over the rows, so a model that remembers what it was shown has only ever seen
text it was already scored on. Positions whose target is a separator are not scored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prism_challenge.sandbox.eval_server import Task
from prism_challenge.sandbox.sampling import cut_rows


@dataclass(frozen=True)
class HeldOutPlan:
    rows: np.ndarray  # int32[n, T + 1]: the val rows used
    positions: np.ndarray  # int64[n, cuts]: increasing positions per row

    @property
    def count(self) -> int:
        return int(self.positions.size)

    def targets(self) -> np.ndarray:
        return np.take_along_axis(self.rows[:, 1:], self.positions, axis=1)

    def batch_rows(self, batch: int) -> int:
        """Rows per task: at most `batch`, and at most half the plan's rows, so a cut of the
        plan always takes two tasks or more and a recheck can give every row neighbours it
        was not scored beside (a plan of one batch would leave it none to draw)."""
        return max(1, min(batch, math.ceil(len(self.rows) / 2)))

    def tasks(self, model: str, batch: int, separator_id: int, label: object = None):
        """Logits tasks in the safe order: cut index by cut index, rows in batches of
        `batch_rows` (the last batch topped up with rows of filler, so every task has one
        shape); each answer's tag is (model, cut, label), `label` naming the plan when
        several are served."""
        inputs = self.rows[:, :-1]
        targets = self.targets()
        batch = self.batch_rows(batch)
        for j in range(self.positions.shape[1]):
            for start in range(0, len(self.rows), batch):
                idx = np.arange(start, min(start + batch, len(self.rows)))
                pos = self.positions[idx, j]
                local = np.arange(len(idx))
                block = np.full((batch, inputs.shape[1]), separator_id, dtype=inputs.dtype)
                block[local] = inputs[idx]
                yield Task("logits", model, cut_rows(block, local, pos, separator_id),
                           targets=targets[idx, j], select_rows=local.tolist(),
                           select_positions=pos.tolist(), tag=(model, j, label))


def heldout_plan(val, seq_len: int, positions: int, cuts_per_row: int,
                 rng: np.random.Generator) -> HeldOutPlan:
    """Choose `positions` held-out positions (fewer if the split is small)."""
    sep = val.manifest.separator_id
    candidates = np.arange(0, val.n_rows(seq_len), 2)
    if candidates.size == 0:
        raise ValueError(f"the val split has no full row of seq_len {seq_len} + 1 tokens")
    cuts = max(1, min(cuts_per_row, seq_len))
    n = min(candidates.size, math.ceil(positions / cuts))
    chosen = np.sort(rng.choice(candidates, size=n, replace=False))
    rows = val.rows_at(seq_len, chosen)
    pos = np.empty((n, cuts), dtype=np.int64)
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        ok = np.flatnonzero(rows[i, 1:] != sep)
        if ok.size < cuts:
            keep[i] = False
            continue
        pos[i] = np.sort(rng.choice(ok, size=cuts, replace=False))
    if not keep.any():
        raise ValueError("the val split has no row with enough scored tokens")
    return HeldOutPlan(rows[keep], pos[keep])


RECHECK = "recheck"  # the cut field of a recheck task's tag


def position_nats(plan: HeldOutPlan, answers) -> np.ndarray:
    """Nats per plan position ([rows, cuts]), from one model's answers to `plan.tasks`.

    Tasks go out cut index by cut index, rows in order within a cut, and the server answers
    them in the order served; so the answers of cut j, concatenated, are rows 0..n-1."""
    out = np.zeros(plan.positions.shape, dtype=np.float64)
    by_cut: dict[int, list[np.ndarray]] = {}
    for a in answers:
        by_cut.setdefault(int(a.task.tag[1]), []).append(np.asarray(a.nats, dtype=np.float64))
    for j, parts in by_cut.items():
        got = np.concatenate(parts)
        if got.size != len(out):
            raise ValueError(f"cut {j} has {got.size} answers for {len(out)} rows")
        out[:, j] = got
    return out


def row_nats(plan: HeldOutPlan, answers) -> np.ndarray:
    """Nats per plan row (summed over its cuts), from one model's answers to `plan.tasks`."""
    return position_nats(plan, answers).sum(axis=1)


def recheck_task(plan: HeldOutPlan, model: str, batch: int, separator_id: int,
                 rng: np.random.Generator, label: object = None) -> Task:
    """One more task shaped like `plan.tasks`' (`batch_rows` rows, each cut after its position
    of one cut index, drawn at random) whose rows come from different plan tasks: each place
    of the batch holds the row that had that place in a task drawn at random. Every row is
    answered again at its own place in a batch of the same shape, beside rows it was not
    scored beside (a plan's tasks hold at most half its rows, so there are
    always two tasks to draw from). A model answers a row from that row alone, so each
    answer equals the one it gave before, with the arithmetic it had (same place, same
    shape); a model that pools what the rows of its batch hold (learning from the held-out
    text it is shown, within one forward) answers differently. Nothing marks it apart from
    a plan task: real rows only, as many as a full one, all at one cut index (rows at
    mixed cut indices would spread their cut lengths more widely than any plan task's,
    which a model could measure). Served after all of the model's plan
    tasks, so it shows no text that was not already scored. Its tag is (model, RECHECK,
    label, rows, cuts)."""
    n = len(plan.rows)
    b = plan.batch_rows(batch)
    tasks = np.array([len(range(s, n, b)) for s in range(b)])  # tasks holding each place
    drawn = rng.integers(0, tasks)
    if b > 1 and (drawn == drawn[0]).all():
        drawn[0] = (drawn[0] + 1 + rng.integers(0, tasks[0] - 1)) % tasks[0]
    idx = drawn * b + np.arange(b)
    n_cuts = plan.positions.shape[1]
    cuts = np.full(b, rng.integers(0, n_cuts))
    pos = plan.positions[idx, cuts]
    local = np.arange(b)
    return Task("logits", model, cut_rows(plan.rows[idx, :-1], local, pos, separator_id),
                targets=plan.targets()[idx, cuts], select_rows=local.tolist(),
                select_positions=pos.tolist(), tag=(model, RECHECK, label, idx, cuts))


def rows_apart(plan: HeldOutPlan, answers, recheck) -> float:
    """The largest change, in nats, between a position's answer in the recheck and in its
    plan task (`answers`: the model's answers to `plan.tasks`)."""
    _, _, _, idx, cuts = recheck.task.tag
    before = position_nats(plan, answers)[idx, cuts]
    diff = np.abs(np.asarray(recheck.nats, dtype=np.float64) - before)
    worst = float(diff.max()) if diff.size else 0.0
    return worst if worst == worst else math.inf


def ratio_se(bits: np.ndarray, nbytes: np.ndarray) -> float | None:
    """Standard error of sum(bits) / sum(bytes) over independent rows (the delta method).

    A row's cuts share its text, so rows, not positions, are the independent units; with
    fewer than two rows there is no estimate (None). `bits` may be per-row differences of
    two models on the same rows (a paired difference: its SE is that of the difference)."""
    n = len(bits)
    total = float(nbytes.sum())
    if n < 2 or total <= 0:
        return None
    ratio = float(bits.sum()) / total
    resid = bits - ratio * nbytes
    return math.sqrt(n / (n - 1) * float(np.sum(resid * resid))) / total
