"""`prism check`: will the validator accept this bundle and can it train at all?

Static gates first (nothing runs if they fail, as on a validator), then a smoke run in the
real sandbox with the configured geometry but a budget of a few batches: it shows the
model builds under the forced seed (and its parameter count against the cap), that
`train(ctx)` consumes batches, and that the run passes the anti-cheat gates a record is
scored with (step-0, causality screen, finite losses, contract). The memorisation
gap is only shown: a few batches say nothing about it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prism_challenge.bundle import Bundle
from prism_challenge.config.settings import Settings
from prism_challenge.isolation import IsolationBackend
from prism_challenge.miner.data import open_local_data
from prism_challenge.miner.findings import Finding, failed, state_findings, static_findings
from prism_challenge.miner.outcome import humanize, run_problem
from prism_challenge.miner.sandbox_run import run_in_sandbox
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.sandbox.stream_order import LaneOrder
from prism_challenge.scoring import ScoreResult, score_record

SMOKE_ROWS = 64
SMOKE_HELDOUT = 128
INFO_ONLY_GATES = ("gap",)
LEARNING_SHARE = 0.1  # of the steps, at each end, whose bpb the learning line compares
# the harness's refusal of a batch over what the smoke budget's stream order allows
OVER_STEP = re.compile(r"batch_size (\d+) is over the (\d+) rows a step may take per rank")


@dataclass
class CheckReport:
    bundle: Bundle
    findings: list[Finding] = field(default_factory=list)
    record: RunRecord | None = None
    score: ScoreResult | None = None
    smoke_rows: int = 0

    @property
    def passed(self) -> bool:
        return not failed(self.findings)


def smoke_settings(settings: Settings, rows: int = SMOKE_ROWS) -> Settings:
    """The configured settings with a budget of `rows` rows and a small val slice."""
    c = settings.challenge
    budget = min(c.token_budget, rows * c.seq_len)
    budget -= budget % c.seq_len
    challenge = c.model_copy(update={"token_budget": max(budget, c.seq_len)})
    sc = settings.scoring
    scoring = sc.model_copy(update={
        "heldout_positions": min(sc.heldout_positions, SMOKE_HELDOUT)})
    return settings.model_copy(update={"challenge": challenge, "scoring": scoring})


def check_bundle(bundle: Bundle, settings: Settings, data_root: Path, *,
                 smoke_rows: int = SMOKE_ROWS, backend: IsolationBackend | None = None,
                 on_event: Callable[[str], None] | None = None) -> CheckReport:
    """Every check of `prism check`.

    The data is opened first, so data errors (`DataRootMissing`, `DataIntegrityError`,
    `DataMismatch`) raise before anything is decided; `LocalRunFailed` when the sandbox
    itself cannot run here.
    """
    smoke = smoke_settings(settings, smoke_rows)
    data = open_local_data(data_root, smoke)
    report = CheckReport(bundle, static_findings(bundle))
    if not report.passed:
        report.findings.append(Finding("smoke run", "skip",
                                       "not run: the validator refuses this bundle before "
                                       "running it; fix the failures above first"))
        return report
    record = run_in_sandbox(bundle, smoke, data, backend=backend, on_event=on_event)
    fitted = rows_for_batch(record, settings)
    if fitted is not None:  # the smoke budget, not the bundle, was too small: size it
        report.findings.append(Finding(
            "smoke budget", "info", f"raised from {record.budget.rows} to {fitted} rows: the "
            f"bundle's batch needs {fitted} (a step takes fewer rows than the budget's lanes; "
            f"pass --smoke-rows {fitted} or more to skip the first try)"))
        smoke = smoke_settings(settings, fitted)
        data = open_local_data(data_root, smoke)
        record = run_in_sandbox(bundle, smoke, data, backend=backend, on_event=on_event)
    report.record, report.smoke_rows = record, record.budget.rows
    report.findings += _run_findings(record, smoke) + state_findings(record)
    report.findings += pace_findings(record, settings)
    report.score = score_record(record, smoke.scoring)
    report.findings += _gate_findings(report.score, record)
    return report


def smallest_rows(batch_size: int, settings: Settings) -> int | None:
    """The fewest budget rows whose stream order lets one rank take `batch_size` rows a step
    (`LaneOrder.max_step_rows` over the configured lanes and ranks); None when no budget
    does (a step takes fewer rows than the lanes)."""
    lanes, ranks = settings.challenge.stream_lanes, settings.sandbox.nproc_per_node
    if batch_size * ranks >= lanes:
        return None
    return next(rows for rows in range(1, 2 * lanes + 1)
                if LaneOrder(rows, lanes).max_step_rows // ranks >= batch_size)


def rows_for_batch(record: RunRecord, settings: Settings) -> int | None:
    """The smoke budget that fits the batch a run was refused for, where the configured
    budget holds it; None when the run was not refused for its batch (or the full run
    would refuse it too: then the failure is the bundle's and is reported as it is)."""
    found = OVER_STEP.search(record.exit_detail or "")
    if record.exit_reason in ("ok", "budget") or found is None:
        return None
    need = smallest_rows(int(found.group(1)), settings)
    full = settings.challenge.token_budget // settings.challenge.seq_len
    return need if need is not None and record.budget.rows < need <= full else None


def _run_findings(record: RunRecord, settings: Settings) -> list[Finding]:
    out = []
    axes = record.axes
    done, budget = record.consumed.rows, record.budget.rows
    ok = record.exit_reason in ("ok", "budget") and done == budget
    if axes is None:
        if ok:  # a failed run says why once, in its own line below
            out.append(Finding("parameters", "fail", "the model was not built and counted"))
    else:
        cap = record.param_cap
        status = "pass" if axes.param_count <= cap else "fail"
        out.append(Finding("parameters", status,
                           f"{axes.param_count:,} of the cap {cap:,} (built under seed "
                           f"{settings.challenge.seed}); {axes.layer_count} layers"))
    detail = (f"{done}/{budget} rows consumed in {record.summary.count} batches, "
              f"exit {record.exit_reason}")
    if (problem := run_problem(record)) is not None:
        detail += f": {problem.line}"
    elif record.exit_detail:
        detail += f": {humanize(record.exit_detail[-600:])}"
    out.append(Finding("smoke run", "pass" if ok else "fail", detail))
    return out + learning_findings(record)


def learning_findings(record: RunRecord) -> list[Finding]:
    """Does the loss fall? The bpb of the first steps against the last ones, LEARNING_SHARE
    of the steps at each end (at least one; every rank's batch of a step, weighted by its
    bytes): one batch at each end is mostly the noise of which text it held. Nothing when
    fewer than two steps were scored."""
    cols = record.columns
    scored = cols.bytes > 0
    steps = np.unique(cols.step[scored])
    if len(steps) < 2:
        return []
    k = max(1, int(len(steps) * LEARNING_SHARE))

    def bpb(chosen: np.ndarray) -> float:
        mask = scored & np.isin(cols.step, chosen)
        return float(cols.nats[mask].sum() / cols.bytes[mask].sum() / math.log(2))

    first, last = bpb(steps[:k]), bpb(steps[-k:])
    trend = "falls" if last < first else "does not fall (yet)"
    which = (f"the first and the last of {len(steps)} steps" if k == 1 else
             f"the first {k} and the last {k} of {len(steps)} steps "
             f"({LEARNING_SHARE:.0%} at each end)")
    return [Finding("learning", "info", f"bpb of {which}: {first:.3f} -> {last:.3f}: {trend}")]


def pace_findings(record: RunRecord, settings: Settings) -> list[Finding]:
    """Will the full token budget fit in `deadline_s` on this machine, at the smoke run's pace?

    The smoke run's tokens per second of training (startup excluded) projected over the
    configured budget. Its first steps carry one-off costs (allocation, warm-up), so the
    projection leans slow: a warning is a reason to measure a longer run, not a verdict."""
    c = settings.challenge
    tokens = record.consumed.scored_tokens
    if tokens <= 0 or record.train_s <= 0:
        return []
    rate = tokens / record.train_s
    need = c.token_budget / rate
    text = (f"smoke run: {tokens:,} tokens in {record.train_s:.1f} s ({rate:,.0f} tokens/s); "
            f"the budget of {c.token_budget:,} tokens would take about {need:,.0f} s")
    if need <= c.deadline_s:
        return [Finding("deadline", "info", f"{text}, within deadline_s {c.deadline_s:g} s")]
    share = c.deadline_s * rate / c.token_budget
    return [Finding("deadline", "info",
                    f"WARNING {text}, over deadline_s {c.deadline_s:g} s: on this machine the "
                    f"deadline would cut the run at about {share:.0%} of the budget and charge "
                    "the rest at log2 V bits per token; make a step cheaper or check on the "
                    "validators' hardware class")]


def _gate_findings(score: ScoreResult, record: RunRecord) -> list[Finding]:
    """One line per gate the score failed. A smoke run that did not finish is reported once,
    in its own line: the gates that follow from it (no final weights, no parameter count,
    the contract's own message again) would repeat it, so they wait for a run that ends."""
    if record.exit_reason not in ("ok", "budget"):
        return [Finding("gates", "skip", "not judged: the smoke run above did not finish; "
                                         "fix it first")]
    out = []
    for reason in score.reasons:
        gate = reason.split(":", 1)[0]
        out.append(Finding(f"gate {gate}", "info" if gate in INFO_ONLY_GATES else "fail", reason))
    if not score.reasons:
        out.append(Finding("gates", "pass",
                           "step-0, causality probe, audit, finite losses, contract, cap"))
    return out
