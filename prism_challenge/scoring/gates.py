"""Anti-cheat gates (docs/scoring.md; docs/security.md B): each names why a run earns nothing.

A gate is a pure function `(record, settings) -> list[str]` of reasons; an empty list means
it passed. A reason starts with the gate's name and a colon so that tools can group them.
A crash or a deadline is deliberately not a gate: the unconsumed budget is charged instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.sandbox.record import ProbeResult, RunRecord
from prism_challenge.scoring.measures import step0_nats_per_token

Gate = Callable[[RunRecord, ScoringSettings], list[str]]


def missing_eval(record: RunRecord, settings: ScoringSettings) -> list[str]:
    """Without the eval sandbox's measurements nothing below can be checked."""
    ev = record.eval
    if ev is None:
        return ["missing_eval: the eval sandbox produced no result"]
    if ev.exit_reason != "ok":
        return [f"missing_eval: the eval sandbox ended with {ev.exit_reason!r} {ev.detail}".strip()]
    missing = [
        name
        for name in (
            "val_bpb_trained",
            "val_bpb_twin",
            "twin_step0_nats_per_token",
            "probe_trained",
            "probe_twin",
        )
        if getattr(ev, name) is None
    ]
    if missing:
        return [f"missing_eval: the eval result lacks {', '.join(missing)}"]
    return []


def non_finite(record: RunRecord, settings: ScoringSettings) -> list[str]:
    """A NaN or infinite loss anywhere makes every sum it enters meaningless."""
    summary = record.summary
    bad = list(summary.non_finite_shown)
    unshown = summary.non_finite - len(bad)
    if not math.isfinite(record.consumed.nats):
        bad.append("consumed total")
    ev = record.eval
    if ev is not None:
        for name in ("val_bpb_trained", "val_bpb_twin", "twin_step0_nats_per_token"):
            value = getattr(ev, name)
            if value is not None and not math.isfinite(value):
                bad.append(name)
    if not bad:
        return []
    more = len(bad) - 5 + unshown
    shown = ", ".join(bad[:5]) + (f" and {more} more" if more > 0 else "")
    return [f"non_finite: non-finite loss in {shown}"]


def step0(record: RunRecord, settings: ScoringSettings) -> list[str]:
    """Smuggled knowledge: the untrained model already predicts better than random init can.

    The first step's recorded loss is made by the forced-seed initial model, so it must not
    be far below min(twin loss, ln V), where the twin's loss is its target-absent held-out
    loss per token. The twin itself is `build_model` under the same seed; if it is far
    below ln V, `build_model` carries knowledge (e.g. embedded statistics or weights).
    """
    ev = record.eval
    if ev is None or ev.twin_step0_nats_per_token is None:
        return []
    reasons = []
    keep = 1.0 - settings.step0_max_drop
    uniform = ev.uniform_nats_per_token
    twin = ev.twin_step0_nats_per_token
    if math.isfinite(twin) and twin < keep * uniform:
        reasons.append(
            f"step0: the random-init twin's loss {twin:.4f} nats/token is more than "
            f"{settings.step0_max_drop:.0%} below uniform ln V = {uniform:.4f} "
            "(knowledge built into build_model)"
        )
    first = step0_nats_per_token(record)
    reference = min(twin, uniform)
    if first is not None and math.isfinite(first) and first < keep * reference:
        reasons.append(
            f"step0: the first batch's loss {first:.4f} nats/token is more than "
            f"{settings.step0_max_drop:.0%} below the random-init reference {reference:.4f}"
        )
    return reasons


def _probe_failure(name: str, probe: ProbeResult | None, tol: float) -> str | None:
    if probe is None:
        return None
    apart = probe.rows_apart
    if probe.ok and probe.max_abs_diff <= tol and (apart is None or apart <= tol):
        return None
    if apart is not None and not apart <= tol:
        return (
            f"causality: the {name} model's held-out answer for a row changed by "
            f"{apart:.3g} nats (> {tol:g}) when other rows shared its batch: a row must be "
            "answered from its own tokens only"
        )
    return (
        f"causality: the {name} model's logits at a position changed by "
        f"{probe.max_abs_diff:.3g} (> {tol:g}) when only later tokens changed "
        f"(positions {probe.positions[:8]})"
    )


def causality(record: RunRecord, settings: ScoringSettings) -> list[str]:
    """Label leakage: position t must not see the tokens after it (trained or twin)."""
    ev = record.eval
    if ev is None:
        return []
    found = (
        _probe_failure("trained", ev.probe_trained, settings.probe_abs_tol),
        _probe_failure("random-init twin", ev.probe_twin, settings.probe_abs_tol),
    )
    return [r for r in found if r is not None]


def param_cap(record: RunRecord, settings: ScoringSettings) -> list[str]:
    """A model over the parameter cap (or one never measured) is out of the competition."""
    if record.axes is None:
        return ["param_cap: the parameter count was not measured"]
    held = max(record.axes.param_count, record.axes.state_count or 0)
    if held > record.param_cap:
        return [
            f"param_cap: the model holds {held:,} tensor elements (parameters and buffers), "
            f"over the cap {record.param_cap:,}"
        ]
    return []


def contract(record: RunRecord, settings: ScoringSettings) -> list[str]:
    """build_model/train broke the contract the harness enforces (shape, cap, ...)."""
    if record.exit_reason == "contract":
        return [f"contract: {record.exit_detail or 'the submission broke the contract'}"]
    return []


GATES: tuple[Gate, ...] = (missing_eval, non_finite, step0, causality, param_cap, contract)


def gate_reasons(record: RunRecord, settings: ScoringSettings) -> list[str]:
    """Every reason every gate gives (all are run, so a report lists them all)."""
    return [reason for gate in GATES for reason in gate(record, settings)]
