"""The verdict on a contender's replay: may this run take weight?

A pure function of the replay record and the settings. A run passes only if its replay
reproduced it (every batch's loss, the same batch sizes, every check step reached) and the
positions re-predicted without their targets agree with what the original run reported,
both in the harness of the replay and, from snapshots, in the eval sandbox where the host
computes the losses itself. Each failing rule gives a reason starting with its name; when
the original run kept model state outside its parameters and buffers, a failed verdict ends
with a `state:` reason naming it, the likely cause. A replay on another stack
(sandbox/stack.py) judges nothing: it is "not comparable".
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from prism_challenge.config.settings import VerificationSettings
from prism_challenge.sandbox.harness.state_contract import ADVICE
from prism_challenge.verification.replay import CheckedPositions, ReplayRecord


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    passed: bool
    reasons: list[str]
    # False when this host's stack differs from the original run's: the replay says
    # nothing about the run (replay it elsewhere), and the run is not failed for it
    comparable: bool = True


def _mean(name: str, checked: CheckedPositions, v: VerificationSettings) -> list[str]:
    if checked.compared and not checked.mean_diff <= v.mean_tol:
        return [f"{name}: without their targets the positions cost {checked.mean_diff:.4f}"
                f" nats more on average than the original run reported"]
    return []


def _allowance(replay: ReplayRecord, settings: VerificationSettings) -> list[str]:
    """The mismatch allowance is sized on every position compared, probes and snapshots
    together: a peek's kept positions fall in either, in proportion to the tokens peeked."""
    compared = replay.probes.compared + replay.snapshots.compared
    mismatched = replay.probes.mismatched + replay.snapshots.mismatched
    if compared == 0:
        return ["positions: no kept position could be re-predicted"]
    allowed = math.floor(settings.max_mismatch_fraction * compared)
    if mismatched <= allowed:
        return []
    examples = replay.probes.examples + replay.snapshots.examples
    ex = examples[0] if examples else None
    where = (f"; e.g. step {ex.step} rank {ex.rank} row {ex.row} position {ex.position}: "
             f"reported {ex.recorded:.4f} nats, {ex.recomputed:.4f} without its target"
             if ex else "")
    return [f"positions: {mismatched} of {compared} kept positions disagree with the "
            f"original run (probes {replay.probes.mismatched} of {replay.probes.compared}, "
            f"snapshots {replay.snapshots.mismatched} of {replay.snapshots.compared}; "
            f"{allowed} allowed){where}"]


def verdict(replay: ReplayRecord, settings: VerificationSettings) -> Verdict:
    reasons: list[str] = []
    if replay.incomparable:
        return Verdict(passed=False, reasons=[replay.incomparable], comparable=False)
    if replay.exit_reason == "infra":
        raise ValueError("the replay failed on the validator's side; retry it")
    if replay.diverged:
        reasons.append(f"replay: diverged from the original run ({replay.diverged})")
    reasons += [f"replay: {m}" for m in replay.missing]
    if replay.batch_mismatch_count:
        m = replay.batch_mismatches[0]
        reasons.append(
            f"replay: {replay.batch_mismatch_count} of {replay.batches_compared} batch losses "
            f"were not reproduced (e.g. step {m.step} rank {m.rank}: {m.original:.6g} then "
            f"{m.replay if m.replay is None else format(m.replay, '.6g')} nats)")
    reasons += _allowance(replay, settings)
    reasons += _mean("probe", replay.probes, settings)
    reasons += _mean("snapshot", replay.snapshots, settings)
    if reasons and replay.state_outside:
        reasons.append(_state_note(replay.state_outside))
    return Verdict(passed=not reasons, reasons=reasons)


def _state_note(notes: list[str]) -> str:
    """Why an honest run may fail its replay: state the checks cannot restore."""
    more = f" (and {len(notes) - 1} more)" if len(notes) > 1 else ""
    return (f"state: the likely cause: the model keeps state outside its parameters and "
            f"buffers ({notes[0]}{more}), which a snapshot does not restore and a replay "
            f"need not reproduce; {ADVICE}")
