"""One research cycle: ask the LLM for claims (and, while progress stalls, for new axes),
gate every answer against the ledger, and record it all as ledger events in one transaction.

A cycle is due every `registry.cycle_scored` scored submissions. The LLM is asked outside
any store transaction (an answer may take `llm.timeout_s`); the gates then run against the
state as it is when the events are written, so a claim added meanwhile cannot be added
twice. An LLM that is down, times out or answers garbage produces one `cycle` event holding
the error and nothing else: the cycle stays due and the research loop retries it after a
backoff. `plan_cycle` is pure, so the simulator runs the same gates and events.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prism_challenge.registry.journal import PROPOSAL_CHARS, CycleRecord, Verdict
from prism_challenge.registry.ledger import LedgerError, apply
from prism_challenge.registry.proposals import (
    AXIS_PROMPT,
    HYPOTHESIS_PROMPT,
    LlmFailure,
    ask,
    brief,
    gate_axis,
    gate_hypothesis,
)
from prism_challenge.registry.state import RegistryState

log = logging.getLogger("prism.registry")
Event = tuple[str, str, dict]  # (unique key, kind, payload)


@dataclass(frozen=True)
class Answers:
    """What the LLM sent: None for a question that was not asked."""

    hypotheses: list | None = None
    axes: list | None = None
    skipped: str = ""


@dataclass
class CycleResult:
    error: str | None = None
    accepted: list[str] = field(default_factory=list)  # hypothesis ids and axis names
    refused: list[tuple[object, str]] = field(default_factory=list)  # (proposal, why)
    written: bool = True  # False: another process recorded this cycle first
    failure_streak: int = 0


def due(state: RegistryState, cfg) -> bool:
    return cfg.cycle_scored > 0 and state.n_obs - state.cycle_obs >= cfg.cycle_scored


def stalled(state: RegistryState, cfg) -> bool:
    return state.since_best >= cfg.stall_window


def open_llm_claims(state: RegistryState) -> int:
    return sum(1 for h in state.live() if h.origin == "llm" and h.status == "active")


def ask_llm(client, llm, state: RegistryState, cfg) -> Answers:
    """Put the cycle's questions to the LLM (`LlmFailure` when one gets no usable answer):
    claims while fewer than `max_proposals` LLM claims are open, axes while stalled."""
    room = cfg.max_proposals - open_llm_claims(state)
    hypotheses, skipped = None, ""
    if room > 0:
        asked = ask(client, llm, HYPOTHESIS_PROMPT, brief(state, cfg, wanted=room), "hypotheses")
        hypotheses = asked[:room]
    else:
        skipped = f"{cfg.max_proposals} LLM claims are open (registry.max_proposals)"
    axes = None
    if stalled(state, cfg):
        asked = ask(client, llm, AXIS_PROMPT, brief(state, cfg, wanted=cfg.max_proposals), "axes")
        axes = asked[: cfg.max_proposals]
    return Answers(hypotheses, axes, skipped)


def _recorded(raw: object) -> object:
    """The proposal as the journal keeps it (bounded)."""
    text = json.dumps(raw, default=str, sort_keys=True)
    return raw if len(text) <= PROPOSAL_CHARS - 50 else {"truncated": text[: PROPOSAL_CHARS - 50]}


def plan_cycle(state: RegistryState, answers: Answers, cfg, *, trigger: str, now: float,
               model: str = "") -> list[Event]:
    """The events one answered cycle appends: each accepted claim or axis proposal, then the
    `cycle` event with every verdict. Pure: `state` is not modified."""
    work = state.model_copy(deep=True)
    events: list[Event] = []
    claims: list[Verdict] = []
    for raw in answers.hypotheses or []:
        prop, why = gate_hypothesis(raw if isinstance(raw, dict) else {}, work, cfg)
        if prop is None:
            claims.append(Verdict(proposal=_recorded(raw), reason=why))
            continue
        payload = {"spec": prop.spec.model_dump(), "origin": "llm",
                   "importance": prop.importance, "rationale": prop.rationale,
                   "parent": prop.parent}
        hid = f"H{len(work.hypotheses) + 1:03d}"
        events.append(_apply(work, f"hyp:{hid}:{work.seq}", "hypothesis", payload, cfg))
        claims.append(Verdict(proposal=_recorded(raw), accepted=hid, reason="ok"))
    axes: list[Verdict] = []
    for raw in answers.axes or []:
        prop, why = gate_axis(raw if isinstance(raw, dict) else {}, work)
        if prop is None:
            axes.append(Verdict(proposal=_recorded(raw), reason=why))
            continue
        name, before = prop.spec.name, set(work.hypotheses)
        payload = {**prop.model_dump(), "cycle": work.stall_cycle}
        events.append(_apply(work, f"axis:{name}:{work.stall_cycle}:{work.seq}",
                             "axis_proposal", payload, cfg))
        canary = sorted(set(work.hypotheses) - before)
        seen = next(p.cycles for p in work.axis_proposals.values() if p.spec.name == name)
        why = (f"adopted as a canary ({canary[0]})" if canary else
               f"recorded in stall cycle {work.stall_cycle} "
               f"({len(seen)} of {cfg.axis_recurrence} cycles to adoption)")
        axes.append(Verdict(proposal=_recorded(raw), accepted=name, reason=why))
    record = CycleRecord(trigger=trigger, time=now, model=model[:200],
                         stalled=stalled(work, cfg), stall_cycle=work.stall_cycle,
                         skipped=answers.skipped, hypotheses=claims, axes=axes)
    events.append(_apply(work, f"cycle:{work.cycles + 1}", "cycle",
                         record.model_dump(mode="json"), cfg))
    return events


def plan_failure(state: RegistryState, error: str, *, trigger: str, now: float,
                 model: str = "") -> list[Event]:
    """The one event a failed cycle appends."""
    record = CycleRecord(trigger=trigger, time=now, model=model[:200], error=error[:500])
    return [(f"cycle-failed:{state.cycle_failures + 1}", "cycle", record.model_dump(mode="json"))]


def _apply(work: RegistryState, key: str, kind: str, payload: dict, cfg) -> Event:
    apply(work, kind, payload, cfg)  # the gates passed, so a LedgerError here is a bug
    return key, kind, payload


def run_cycle(registry, client, llm, *, trigger: str = "scored",
              clock: Callable[[], float] = time.time) -> CycleResult | None:
    """Run one cycle if one is due (None otherwise) and record it."""
    cfg = registry.cfg
    state = registry.state()
    if not due(state, cfg):
        return None
    try:
        answers = ask_llm(client, llm, state, cfg)
    except LlmFailure as exc:
        error = str(exc)
        written = registry.record(lambda st: plan_failure(
            st, error, trigger=trigger, now=clock(), model=llm.model) if due(st, cfg) else [])
        streak = registry.state().failure_streak
        log.warning("research cycle failed (%d in a row): %s", streak, error)
        return CycleResult(error=error, written=bool(written), failure_streak=streak)
    try:
        written = registry.record(lambda st: plan_cycle(
            st, answers, cfg, trigger=trigger, now=clock(), model=llm.model)
            if due(st, cfg) else [])
    except LedgerError:
        log.exception("research cycle: the gates let through an event the ledger refuses")
        raise
    result = CycleResult(written=bool(written))
    for _, kind, payload in written:
        if kind == "cycle":
            for v in payload["hypotheses"] + payload["axes"]:
                if v["accepted"]:
                    result.accepted.append(v["accepted"])
                else:
                    result.refused.append((v["proposal"], v["reason"]))
    log.info("research cycle: %d accepted (%s), %d refused", len(result.accepted),
             ", ".join(result.accepted) or "none", len(result.refused))
    return result
