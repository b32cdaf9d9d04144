"""LLM proposals: new hypotheses any time, new axes when progress stalls, all behind gates.

The LLM is asked through the `openai` client for structured JSON output, and nothing it says
is trusted: a hypothesis enters only if it parses against the schema, is over known axes
and arms, is not a normalised duplicate nor a near duplicate of a claim already held, and
claims importance >= `min_importance`. A new axis must have a bounded domain; the ledger
adopts it only when the same proposal recurs in `axis_recurrence` stall cycles, and then
only as a canary. An unreachable LLM costs a proposal round, never a submission.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from dataclasses import dataclass, field

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from prism_challenge.registry.axes import AxisSpec
from prism_challenge.registry.hypotheses import (
    HypothesisSpec,
    Interaction,
    Threshold,
    axes_of,
    canonical_key,
    check_against,
)
from prism_challenge.registry.ledger import LedgerError
from prism_challenge.registry.state import RegistryState, terms_of


class HypothesisProposal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: HypothesisSpec
    importance: float = Field(ge=0, le=1)
    rationale: str = Field("", max_length=500)
    parent: str | None = None


class AxisProposal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: AxisSpec
    treatment: str
    control: str
    rationale: str = Field("", max_length=500)


@dataclass
class ProposalReport:
    accepted: list[str] = field(default_factory=list)  # hypothesis ids / axis names
    rejected: list[tuple[dict, str]] = field(default_factory=list)  # (raw, reason)
    error: str | None = None


def make_client(llm_settings) -> openai.OpenAI:
    """An OpenAI-compatible client from the `llm` settings; the key only from the env."""
    return openai.OpenAI(
        base_url=llm_settings.base_url,
        api_key=os.environ.get(llm_settings.api_key_env, "unset"),
        timeout=llm_settings.timeout_s,
        max_retries=0,
    )


def _near_duplicate(spec, rationale: str, state: RegistryState, ratio: float) -> str | None:
    for h in state.hypotheses.values():
        if h.spec.kind != spec.kind or set(axes_of(h.spec)) != set(axes_of(spec)):
            continue
        if isinstance(spec, Threshold) and _close(spec, h.spec, state):
            return h.id
        if isinstance(spec, Interaction):
            pairs = {frozenset((spec.a1, spec.a0)), frozenset((spec.b1, spec.b0))}
            if pairs & {frozenset((h.spec.a1, h.spec.a0)), frozenset((h.spec.b1, h.spec.b0))}:
                return h.id
        if rationale and h.rationale and difflib.SequenceMatcher(
            None, rationale.lower(), h.rationale.lower()
        ).ratio() >= ratio:
            return h.id
    return None


def _close(a: Threshold, b: Threshold, state: RegistryState) -> bool:
    axis = next(x for x in state.axes if x.name == a.axis)
    if axis.kind == "logfloat":
        return abs(math.log10(a.threshold) - math.log10(b.threshold)) < 0.1
    return abs(a.threshold - b.threshold) < 0.05 * (axis.high - axis.low)


def gate_hypothesis(raw: dict, state: RegistryState, cfg) -> tuple[HypothesisProposal | None, str]:
    """(proposal, "ok") or (None, why it was refused)."""
    try:
        prop = HypothesisProposal.model_validate(raw)
    except ValidationError as exc:
        return None, f"schema: {exc.errors()[0]['msg']}"
    try:
        check_against(prop.spec, state.schema())
    except ValueError as exc:
        return None, f"axes: {exc}"
    key = canonical_key(prop.spec)
    if any(canonical_key(h.spec) == key for h in state.hypotheses.values()):
        return None, f"duplicate: {key}"
    near = _near_duplicate(prop.spec, prop.rationale, state, cfg.near_duplicate_ratio)
    if near is not None:
        return None, f"near duplicate of {near}"
    if prop.importance < cfg.min_importance:
        return None, f"importance {prop.importance} < {cfg.min_importance}"
    if prop.parent is not None and prop.parent not in state.hypotheses:
        return None, f"unknown parent {prop.parent!r}"
    return prop, "ok"


def gate_axis(raw: dict, state: RegistryState) -> tuple[AxisProposal | None, str]:
    try:
        prop = AxisProposal.model_validate(raw)
    except ValidationError as exc:
        return None, f"schema: {exc.errors()[0]['msg']}"
    if prop.spec.source != "declared":
        return None, "a new axis can only be declared by miners"
    if prop.spec.name in {a.name for a in state.axes}:
        return None, f"axis {prop.spec.name!r} already exists"
    arms = prop.spec.arms
    if prop.treatment not in arms or prop.control not in arms or prop.treatment == prop.control:
        return None, f"treatment/control must be two different arms of {arms}"
    return prop, "ok"


def _brief(state: RegistryState, cfg) -> str:
    return json.dumps(
        {
            "axes": [{"name": a.name, "kind": a.kind, "arms": a.arms} for a in state.schema()],
            "hypotheses": [
                {"id": h.id, "statement": h.statement, "status": h.status,
                 "mean": round(terms_of(h, cfg).mean, 3), "n": h.n}
                for h in state.hypotheses.values()
            ],
            "best_bpb": state.best_bpb,
            "observations": state.n_obs,
        },
        sort_keys=True,
    )


HYPOTHESIS_PROMPT = (
    "You propose falsifiable hypotheses about which design axes make a small language model "
    "learn faster from scratch (lower prequential bits per byte). Use only the axes and arms "
    "given. Answer with JSON {\"hypotheses\": [{\"spec\": {...}, \"importance\": 0..1, "
    "\"rationale\": str, \"parent\": id|null}]} where spec is one of "
    "{\"kind\":\"single\",\"axis\",\"treatment\",\"control\"}, "
    "{\"kind\":\"threshold\",\"axis\",\"threshold\",\"better\":\"above\"|\"below\"}, "
    "{\"kind\":\"interaction\",\"axis_a\",\"a1\",\"a0\",\"axis_b\",\"b1\",\"b0\"}."
)
AXIS_PROMPT = (
    "Progress has stalled. Propose new design axes miners could declare in prism.toml. "
    "Answer with JSON {\"axes\": [{\"spec\": {\"name\", \"kind\": int|float|logfloat|"
    "categorical, \"low\", \"high\", \"edges\", \"values\" (<= 8), \"description\"}, "
    "\"treatment\": arm, \"control\": arm, \"rationale\": str}]}."
)


def _ask(client: openai.OpenAI, model: str, system: str, brief: str, name: str) -> list[dict]:
    response = client.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": brief}],
        response_format={
            "type": "json_schema",
            "json_schema": {
                "name": name,
                "schema": {"type": "object", "properties": {name: {"type": "array"}},
                           "required": [name]},
            },
        },
        temperature=0,
    )
    doc = json.loads(response.choices[0].message.content or "")
    items = doc.get(name) if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ValueError(f"the answer has no {name!r} list")
    return items


def propose_hypotheses(registry, client: openai.OpenAI, model: str) -> ProposalReport:
    """Ask for hypotheses, gate them, add the survivors to the ledger (origin "llm")."""
    cfg, report = registry.cfg, ProposalReport()
    state = registry.state()
    try:
        items = _ask(client, model, HYPOTHESIS_PROMPT, _brief(state, cfg), "hypotheses")
    except (openai.OpenAIError, ValueError) as exc:
        report.error = f"{type(exc).__name__}: {exc}"
        return report
    for raw in items[: cfg.max_proposals]:
        prop, why = gate_hypothesis(raw if isinstance(raw, dict) else {}, state, cfg)
        if prop is None:
            report.rejected.append((raw, why))
            continue
        try:
            hid = registry.add_hypothesis(
                {"spec": prop.spec.model_dump(), "origin": "llm", "importance": prop.importance,
                 "rationale": prop.rationale, "parent": prop.parent}
            )
        except LedgerError as exc:
            report.rejected.append((raw, str(exc)))
            continue
        report.accepted.append(hid)
        state = registry.state()
    return report


def propose_axes(registry, client: openai.OpenAI, model: str) -> ProposalReport:
    """When stalled, ask for new axes; each gated proposal is recorded for its stall cycle."""
    cfg, report = registry.cfg, ProposalReport()
    stalled, cycle = registry.stalled()
    if not stalled:
        report.error = "not stalled"
        return report
    state = registry.state()
    try:
        items = _ask(client, model, AXIS_PROMPT, _brief(state, cfg), "axes")
    except (openai.OpenAIError, ValueError) as exc:
        report.error = f"{type(exc).__name__}: {exc}"
        return report
    for raw in items[: cfg.max_proposals]:
        prop, why = gate_axis(raw if isinstance(raw, dict) else {}, state)
        if prop is None:
            report.rejected.append((raw, why))
            continue
        registry.propose_axis({**prop.model_dump(), "cycle": cycle})
        report.accepted.append(prop.spec.name)
    return report
