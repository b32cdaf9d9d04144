"""From one run record to one score: the measures, the penalty and the gates together."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.scoring import measures
from prism_challenge.scoring.gates import gate_reasons
from prism_challenge.scoring.penalty import penalised_bpb, penalty_fraction


class ScoreResult(BaseModel):
    """The verdict on one run. `eligible` is exactly `not reasons`.

    `bpb` is what ranks: the prequential bpb over the budget after the gap penalty, or the
    know-nothing `uniform_bpb` when the measured value is not finite. Optional measures
    are None when the record cannot provide them (never NaN, so the result is valid JSON).
    A run stopped early is `censored`: its `bpb` is the bound it was stopped on (its full
    score is only known to lie above it), and it is never ranked.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bpb: float
    prequential_bpb: float | None
    uniform_bpb: float
    tail_bpb: float | None
    heldout_delta: float | None
    gap: float | None
    # the held-out bpb ± its standard error, the gap's SE (held-out and best window) and its
    # lower bound gap - z * SE: the figure the penalty and the gap gate judge (equal to `gap`
    # when no SE was measured); the paired SE of the held-out delta
    heldout_bpb: float | None = None
    heldout_se: float | None = None
    gap_se: float | None = None
    gap_bound: float | None = None
    heldout_delta_se: float | None = None
    # the prequential bpb per equal stretch of the budget's rows: paired between two runs of
    # a data version, for the dethrone rule's noise (None when the run did not tile the budget)
    stream_parts: list[float] | None = None
    penalty: float  # fraction of the way to uniform_bpb, in [0, 1]
    eligible: bool
    reasons: list[str]
    notes: list[str]
    unconsumed_tokens: int
    exit_reason: str
    censored: bool = False


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _gap_reason(gap: float, tail: float | None, held: float | None,
                settings: ScoringSettings) -> str:
    """Why a held-out bpb far above the stream's best window is not scored.

    A run whose own stream got as bad as its held-out text diverged; one whose stream stayed
    good read its targets or was tampered with. Either way the run is not scored: a model
    that read its targets early and then "diverged" would otherwise keep its early windows."""
    head = (f"gap: the target-absent held-out bpb is {gap:.4f} above the stream's best window "
            f"(zeroed at {settings.gap_zero:g})")
    if tail is not None and held is not None and tail >= held - settings.gap_zero:
        return (f"{head}: the run diverged (its stream's tail is {tail:.4f} bpb, its held-out "
                f"{held:.4f}); a run whose loss rises past its best is not scored")
    return f"{head}: the model read its targets, or the record was tampered with"


def _gap_text(gap: float, se: float | None, z: float) -> str:
    """'0.3000' or '0.3000 (at least 0.2400 at 2 SE)' when the held-out SE is known."""
    if not se:
        return f"{gap:.4f}"
    return f"{gap:.4f} (at least {gap - z * se:.4f} at {z:g} SE)"


def score_record(record: RunRecord, settings: ScoringSettings) -> ScoreResult:
    """Score a run record; raises `ScoringError` for a record that is not scorable at all."""
    if record.exit_reason == "infra":
        raise measures.ScoringError(
            "an 'infra' run failed on the validator's side; retry it instead of scoring it"
        )
    measured = _finite(measures.prequential_bpb(record))
    uniform = measures.uniform_bpb(record)
    found = measures.gap_and_se(record, settings.curve_windows, settings.curve_window_tokens)
    gap = _finite(found[0]) if found else None
    gap_se = _finite(found[1]) if found and gap is not None else None
    held_se = _finite(record.eval.val_bpb_trained_se) if record.eval else None
    bound = None if gap is None else gap - settings.gap_z * (gap_se or 0.0)
    fraction = penalty_fraction(bound, settings.gap_penalty_start, settings.gap_zero)
    reasons = gate_reasons(record, settings)
    notes = []
    unconsumed = measures.unconsumed_tokens(record)
    if unconsumed:
        notes.append(
            f"{unconsumed:,} unconsumed tokens charged at log2({record.vocab_size}) bits each "
            f"(exit: {record.exit_reason})"
        )
    tail = _finite(measures.tail_bpb(record, settings.tail_fraction))
    held = record.eval.val_bpb_trained if record.eval else None
    if bound is not None and bound >= settings.gap_zero:
        reasons.append(_gap_reason(gap, tail, held, settings))
    elif fraction > 0:
        notes.append(
            f"gap {_gap_text(gap, gap_se, settings.gap_z)} > {settings.gap_penalty_start:g}: "
            f"bpb moved {fraction:.1%} of the way to the know-nothing score"
        )
    if tail is not None and held is not None and tail - held > settings.gap_zero:
        notes.append(
            f"flag: the held-out bpb {held:.4f} is far below the stream's tail {tail:.4f}: "
            "the model did much worse while scored than it does afterwards"
        )
    bpb = uniform if measured is None else penalised_bpb(measured, uniform, fraction)
    stop = record.stopped_early
    if stop is not None:
        bpb = stop.bound_bpb
        notes.insert(0, (
            f"censored: stopped at {stop.checkpoint:.0%} of the budget; its bpb would be at "
            f"least {stop.bound_bpb:.4f} even {stop.max_gain:.0%} better than the leader "
            f"(submission {stop.leader_submission}) on the rest, above the bar "
            f"{stop.target_bpb:.4f}"))
    return ScoreResult(
        bpb=bpb,
        prequential_bpb=measured,
        uniform_bpb=uniform,
        tail_bpb=tail,
        heldout_delta=_finite(measures.heldout_delta(record)),
        gap=gap,
        heldout_bpb=_finite(held),
        heldout_se=held_se,
        gap_se=gap_se,
        gap_bound=bound,
        heldout_delta_se=_finite(record.eval.heldout_delta_se) if record.eval else None,
        stream_parts=measures.stream_parts(record, settings.dethrone_windows),
        penalty=fraction,
        eligible=not reasons,
        reasons=reasons,
        notes=notes,
        unconsumed_tokens=unconsumed,
        exit_reason=record.exit_reason,
        censored=stop is not None,
    )
