"""Where the next submissions should go: exploration shares over the active hypotheses.

score = information value 4P(1-P) x importance x credibility (LLM-proposed only)
        x indecision penalty 0.5 ** (streak / half_life)
shares = softmax(score / temperature). Canary hypotheses get a fixed small share off the
top; a *decision sprint* gives `sprint_share` to the one active claim nearest a decision
(support or refute probability >= sprint_trigger) as long as it has not idled past
`sprint_max_streak`. Ties are broken by hypothesis id, so the result is a pure function of
the state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prism_challenge.registry.beta import credibility, information_value
from prism_challenge.registry.evidence import queue_key
from prism_challenge.registry.hypotheses import cells_of, predictors
from prism_challenge.registry.state import HypState, RegistryState, terms_of


@dataclass(frozen=True)
class Allocation:
    shares: dict[str, float]
    scores: dict[str, float]
    sprint: str | None
    cells: dict[str, list[dict]] = field(default_factory=dict)  # hid -> open cells


def score(h: HypState, cfg) -> float:
    t = terms_of(h, cfg)
    value = information_value(t) * h.importance
    if h.origin == "llm":
        value *= credibility(t.n, cfg.credibility_n)
    return value * 0.5 ** (h.streak / cfg.indecision_half_life)


def _softmax(scores: dict[str, float], temperature: float) -> dict[str, float]:
    if not scores:
        return {}
    top = max(scores.values())
    exp = {k: math.exp((v - top) / temperature) for k, v in scores.items()}
    total = sum(exp.values())
    return {k: v / total for k, v in exp.items()}


def _sprint(active: list[HypState], cfg) -> str | None:
    best: tuple[float, str] | None = None
    for h in active:
        t = terms_of(h, cfg)
        near = max(t.p_support, t.p_refute)
        if near >= cfg.sprint_trigger and h.streak <= cfg.sprint_max_streak:
            if best is None or near > best[0]:
                best = (near, h.id)
    return None if best is None else best[1]


def waiting_strata(state: RegistryState) -> dict[str, list[str]]:
    """Per claim id, the strata where a run waits, oldest first (one pass over the queues,
    instead of one per claim)."""
    out: dict[str, dict[str, None]] = {}
    for key, queue in state.queues.items():
        if queue:
            hid, _, stratum = key.split("|", 2)
            out.setdefault(hid, {})[stratum] = None
    return {hid: list(strata) for hid, strata in out.items()}


def open_cells(state: RegistryState, h: HypState, limit: int = 20,
               strata: list[str] | None = None) -> list[dict]:
    """Test cells the directives ask for, oldest waiting strata first: cells where a run
    completes a contrast at once (every cell it is contrasted with has a run waiting),
    then empty cells of strata where a grid contrast is being assembled. `strata`: this
    claim's entry of `waiting_strata`, when the caller has it."""
    if strata is None:
        strata = waiting_strata(state).get(h.id, [])
    completing, building = [], []
    for stratum in strata:
        counts = {c: len(state.queues.get(queue_key(h.id, c, stratum), []))
                  for c in cells_of(h.spec)}
        for cell in counts:
            entry = {"stratum": stratum, "cell": cell}
            if all(counts[o] for o, _ in predictors(h.spec)[cell]):
                completing.append(entry)
            elif counts[cell] == 0:
                building.append(entry)
    return (completing + building)[:limit]


def allocate(state: RegistryState, cfg) -> Allocation:
    active = [h for h in state.live() if h.status == "active"]
    canaries = [h for h in active if h.canary_axis]
    regular = [h for h in active if not h.canary_axis]
    scores = {h.id: score(h, cfg) for h in regular}
    canary_total = min(cfg.canary_share * len(canaries), 0.5) if regular else 1.0
    shares = {h.id: canary_total / len(canaries) for h in canaries} if canaries else {}
    rest = 1.0 - (canary_total if canaries else 0.0)
    sprint = _sprint(regular, cfg)
    if sprint is not None and len(regular) > 1:
        others = _softmax({k: v for k, v in scores.items() if k != sprint}, cfg.temperature)
        shares[sprint] = rest * cfg.sprint_share
        for k, v in others.items():
            shares[k] = rest * (1 - cfg.sprint_share) * v
    else:
        for k, v in _softmax(scores, cfg.temperature).items():
            shares[k] = rest * v
    waiting = waiting_strata(state)
    cells = {h.id: open_cells(state, h, strata=waiting.get(h.id, [])) for h in active}
    return Allocation(
        shares=dict(sorted(shares.items())), scores=scores, sprint=sprint, cells=cells
    )
