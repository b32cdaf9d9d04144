"""The fold: `apply(state, kind, payload, cfg)` is the only thing that changes the state.

Ledger events (stored in order in `registry_events`):
- ``hypothesis``   a gated claim enters (seed, LLM or canary);
- ``observation``  one scored submission with its axis reading, taken when it was observed;
- ``axis_proposal`` an LLM's new axis, proposed in a given stall cycle;
- ``cycle``        one research cycle: what the LLM proposed and what the gates decided, or
                   why it failed (the claims it added are the ``hypothesis`` events before it);
- ``note``         an operator's annotation of a hypothesis.
Replaying the same events from `RegistryState()` gives the same state, hence the same
program.md and digest: nothing here reads a clock or draws a random number.
"""

from __future__ import annotations

import math

from prism_challenge.registry.allocation import allocate
from prism_challenge.registry.axes import AxisReading, AxisSpec
from prism_challenge.registry.beta import status_of
from prism_challenge.registry.credit import credit_contrast, credit_decision, design_of, prune
from prism_challenge.registry.evidence import Contrast, match, outcome, queue_key, stratum_of
from prism_challenge.registry.hypotheses import (
    SPEC_ADAPTER,
    Interaction,
    SingleFactor,
    axes_of,
    canonical_key,
    cell_of,
    check_against,
)
from prism_challenge.registry.journal import apply_cycle, apply_note
from prism_challenge.registry.state import (
    AxisProposalState,
    Checkpoint,
    HypState,
    RegistryState,
    terms_of,
)

RECENT = 256
STRATA_MAX = 256  # waiting cells kept per hypothesis (oldest dropped first)
CONTRASTS_MAX = 2000  # contrasts remembered between two research cycles (for the journal)


class LedgerError(ValueError):
    """An event the current state refuses (unknown axis, duplicate claim, bad value)."""


def apply(state: RegistryState, kind: str, payload: dict, cfg) -> RegistryState:
    handler = {"hypothesis": _hypothesis, "observation": _observation, "axis_proposal": _axis,
               "cycle": _cycle, "note": _note}
    if kind not in handler:
        raise LedgerError(f"unknown ledger event {kind!r}")
    handler[kind](state, payload, cfg)
    state.seq += 1
    return state


def _hypothesis(state: RegistryState, p: dict, cfg) -> None:
    try:
        spec = SPEC_ADAPTER.validate_python(p["spec"])
        check_against(spec, state.schema())
    except (ValueError, KeyError) as exc:
        raise LedgerError(f"hypothesis refused: {exc}") from exc
    key = canonical_key(spec)
    if any(canonical_key(h.spec) == key for h in state.hypotheses.values()):
        raise LedgerError(f"hypothesis refused: duplicate of an existing claim ({key})")
    parent = p.get("parent")
    if parent is not None and parent not in state.hypotheses:
        raise LedgerError(f"hypothesis refused: unknown parent {parent!r}")
    hid = f"H{len(state.hypotheses) + 1:03d}"
    h = HypState(
        id=hid,
        spec=spec,
        origin=p.get("origin", "seed"),
        importance=float(p.get("importance", 0.5)),
        parent=parent,
        rationale=str(p.get("rationale", ""))[:500],
        created_at=state.n_obs,
        canary_axis=p.get("canary_axis"),
    )
    state.hypotheses[hid] = h
    for r in state.recent:  # earlier submissions become references, never evidence
        reading = AxisReading(arms=r["arms"], raw=r["raw"])
        cell = cell_of(spec, reading)
        if cell is not None:
            _push(state, queue_key(hid, cell, stratum_of(spec, r["arms"], cfg.match_axes)),
                  [r["hotkey"], r["bpb"], r["run"], r.get("sid"), design_of(r["arms"])], cfg)


def _push(state: RegistryState, key: str, entry: list, cfg) -> None:
    if key not in state.queues:
        hid = key.split("|", 1)[0] + "|"
        mine = [k for k in state.queues if k.startswith(hid)]
        for old in mine[: max(len(mine) - STRATA_MAX + 1, 0)]:  # oldest waiting cells go
            del state.queues[old]
    queue = state.queues.setdefault(key, [])
    queue.append(entry)
    del queue[: max(len(queue) - cfg.queue_max, 0)]


def _observation(state: RegistryState, p: dict, cfg) -> None:
    bpb = float(p["bpb"])
    if not math.isfinite(bpb) or bpb < 0:
        raise LedgerError(f"observation refused: bpb {bpb!r} is not a finite non-negative number")
    reading = AxisReading.model_validate(p["reading"])
    sid = p.get("submission_id")
    _enter_competition(state, p.get("competition"))
    state.n_obs += 1
    if p["eligible"] and p.get("censored"):  # a lower bound: no contrast can use it
        state.n_censored += 1
        _track_stall(state, None, None, cfg)  # it could not beat the leader: no new best
    elif p["eligible"]:
        state.n_eligible += 1
        _track_stall(state, bpb, reading, cfg)
        run = [p["hotkey"], bpb, state.n_obs, sid, design_of(reading.arms)]
        _evidence(state, reading, run, cfg)
        state.recent.append({"hotkey": p["hotkey"], "bpb": bpb, "arms": reading.arms,
                             "raw": reading.raw, "run": state.n_obs, "sid": sid})
        del state.recent[: max(len(state.recent) - RECENT, 0)]
    prune(state, cfg)
    if state.n_obs % cfg.checkpoint_every == 0:
        _checkpoint(state, cfg)


def _enter_competition(state: RegistryState, key: str | None) -> None:
    """Runs scored under other terms (another data version or budget) are never compared:
    on the first observation under a new key, the runs waiting for partners, the recent
    readings and the best so far are dropped. What the hypotheses learnt from earlier
    contrasts stays: each was made within one competition."""
    if key is None or key == state.competition:
        return
    if state.competition is not None:
        state.queues = {}
        state.recent = []
        state.best_bpb, state.best_arms, state.since_best = None, {}, 0
    state.competition = key


def _track_stall(state: RegistryState, bpb: float | None, reading: AxisReading | None,
                 cfg) -> None:
    """`bpb` None: a censored run, known only not to be a new best."""
    if bpb is None and state.best_bpb is None:
        return
    if bpb is not None and (state.best_bpb is None or bpb < state.best_bpb - cfg.tie_bpb):
        state.best_bpb = bpb
        state.best_arms = dict(reading.arms)
        state.since_best = 0
        return
    state.since_best += 1
    if state.since_best % cfg.stall_window == 0:
        state.stall_cycle += 1


def _evidence(state, reading: AxisReading, run: list, cfg) -> None:
    """Single use: a run is evidence for at most one pair claim (single factor, threshold)
    and at most one grid claim. Of the claims of a pool it can complete, the one whose
    partners waited longest wins (then the lowest id). Partners leave the queues of their
    pool; a run used by a pair claim X stays available only to grids over X's axes, whose
    strata exclude the axes X's outcome can steer. Grids steer no recipe, so using a run in
    a grid leaves it available to pair claims. Otherwise the run waits wherever it falls.
    `run` is the new queue entry [hotkey, bpb, run index, submission id, design]."""
    hotkey, bpb = run[0], run[1]
    waits: list[tuple[HypState, str]] = []
    best: dict[bool, tuple[HypState, Contrast]] = {}
    for h in state.live():
        cell = cell_of(h.spec, reading)
        if cell is None:
            continue
        stratum = stratum_of(h.spec, reading.arms, cfg.match_axes)
        c = match(h.id, h.spec, cell, stratum, hotkey, bpb, state.queues)
        grid = isinstance(h.spec, Interaction)
        if c.gain is None:
            waits.append((h, queue_key(h.id, cell, stratum)))
        elif grid not in best or min(c.runs) < min(best[grid][1].runs):
            best[grid] = (h, c)
    pair = best.get(False)
    for h, key in waits:
        grid = isinstance(h.spec, Interaction)
        if grid and (True in best or (pair and not _nested(h, pair[0]))):
            continue
        if not grid and pair is not None:
            continue
        _push(state, key, list(run), cfg)
    for grid, (h, c) in sorted(best.items()):
        gone = set(c.runs)
        for key, queue in state.queues.items():
            other = state.hypotheses[key.split("|", 1)[0]]
            in_pool = isinstance(other.spec, Interaction) == grid
            if not grid and not in_pool and _nested(other, h):
                continue
            if (in_pool or not grid) and any(entry[2] in gone for entry in queue):
                queue[:] = [entry for entry in queue if entry[2] not in gone]
        _record(state, h, c, run, cfg)


def _nested(grid: HypState, pair: HypState) -> bool:
    return set(axes_of(pair.spec)) <= set(axes_of(grid.spec))


def _record(state, h: HypState, c: Contrast, run: list, cfg) -> None:
    if h.status == "active":  # a contrast the directives asked for
        credit_contrast(state, h, [run, *(entry for _, entry in c.members)], cfg)
    h.gain_n += 1
    h.gain_sum += c.gain
    h.gain_sq += c.gain * c.gain
    result = outcome(c.gain, cfg.tie_bpb)
    sids = [x for x in (run[3], *(e[3] if len(e) > 3 else None for _, e in c.members))
            if x is not None]
    state.contrasts.append([state.n_obs, h.id, result, sids])
    del state.contrasts[: max(len(state.contrasts) - CONTRASTS_MAX, 0)]
    if result == "tie":
        h.ties += 1
    else:
        _count(state, h, result, run, cfg)
    if h.canary_axis:
        _judge_canary(state, h, cfg)
    if h.status == "refuted" and not h.archived:
        h.archived = True
        h.archive_reason = f"refuted at observation {state.n_obs}"


def _count(state: RegistryState, h: HypState, result: str, run: list, cfg) -> None:
    if result == "win":
        h.wins += 1
    else:
        h.losses += 1
    before = h.status
    h.status = status_of(terms_of(h, cfg), decide_prob=cfg.decide_prob, min_n=cfg.min_n)
    h.streak = h.streak + 1 if h.status == "active" and h.n >= cfg.min_n else 0
    if h.status != "active" and before == "active":
        h.decided_at = state.n_obs
        credit_decision(state, run, cfg)


def _judge_canary(state: RegistryState, h: HypState, cfg) -> None:
    """After canary_n contrasts (ties included) a canary axis is kept when its own contrast
    shows a direction (or a decision), else reverted."""
    if h.status == "active" and h.gain_n < cfg.canary_n:
        return
    t = terms_of(h, cfg)
    axis = h.canary_axis
    h.canary_axis = None
    if h.status != "active" or t.p_claim >= 0.8 or t.p_claim <= 0.2:
        state.axis_status[axis] = "active"
        h.rationale = (h.rationale + f" [canary promoted at observation {state.n_obs}]").strip()
        return
    state.axis_status[axis] = "reverted"
    h.archived = True
    h.archive_reason = (
        f"canary reverted at observation {state.n_obs}: no direction (P={t.p_claim:.2f})"
    )


def _axis(state: RegistryState, p: dict, cfg) -> None:
    try:
        spec = AxisSpec.model_validate(p["spec"])
    except (ValueError, KeyError) as exc:
        raise LedgerError(f"axis proposal refused: {exc}") from exc
    if spec.source != "declared":
        raise LedgerError("axis proposal refused: new axes can only be declared")
    treatment, control = p.get("treatment"), p.get("control")
    if treatment not in spec.arms or control not in spec.arms or treatment == control:
        raise LedgerError(f"axis proposal refused: treatment/control must be two of {spec.arms}")
    key = spec.model_dump_json(exclude={"description"})  # the same axis, however worded
    prop = state.axis_proposals.setdefault(
        key, AxisProposalState(spec=spec, treatment=treatment, control=control,
                               rationale=str(p.get("rationale", ""))[:500])
    )
    cycle = int(p["cycle"])
    if cycle not in prop.cycles:
        prop.cycles.append(cycle)
    known = {a.name for a in state.axes}
    if prop.adopted or len(prop.cycles) < cfg.axis_recurrence or spec.name in known:
        return
    prop.adopted = True
    state.axes.append(spec)
    state.axis_status[spec.name] = "canary"
    claim = SingleFactor(axis=spec.name, treatment=treatment, control=control)
    _hypothesis(
        state,
        {"spec": claim.model_dump(), "origin": "canary", "importance": 0.5,
         "rationale": prop.rationale, "canary_axis": spec.name},
        cfg,
    )


def _cycle(state: RegistryState, p: dict, cfg) -> None:
    try:
        apply_cycle(state, p, cfg)
    except ValueError as exc:
        raise LedgerError(f"cycle refused: {exc}") from exc


def _note(state: RegistryState, p: dict, cfg) -> None:
    try:
        apply_note(state, p)
    except ValueError as exc:
        raise LedgerError(f"note refused: {exc}") from exc


def _checkpoint(state: RegistryState, cfg) -> None:
    means = {h.id: round(terms_of(h, cfg).mean, 6) for h in state.hypotheses.values()}
    shares = {k: round(v, 6) for k, v in allocate(state, cfg).shares.items()}
    ids = sorted(state.hypotheses)
    archived = [k for k in ids if state.hypotheses[k].archived]
    state.checkpoints.append(
        Checkpoint(
            at=state.n_obs,
            moved={k: [state.last_means.get(k, 0.5), v] for k, v in means.items()
                   if v != state.last_means.get(k, 0.5)},
            eliminated=[k for k in archived if k not in state.last_archived],
            new=[k for k in ids if k not in state.last_ids],
            shares={k: [state.last_shares.get(k, 0.0), shares.get(k, 0.0)]
                    for k in sorted(set(shares) | set(state.last_shares))
                    if state.last_shares.get(k, 0.0) != shares.get(k, 0.0)},
        )
    )
    state.last_means, state.last_shares, state.last_ids = means, shares, ids
    state.last_archived = archived
