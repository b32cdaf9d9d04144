"""LLM proposals: new hypotheses any time, new axes when progress stalls, all behind gates.

The LLM is asked through the `openai` client for structured JSON output, and nothing it says
is trusted: a hypothesis enters only if it parses against the schema, is over known axes
and arms, is not a normalised duplicate nor a near duplicate of a claim already held, and
claims importance >= `min_importance`. A new axis must have a bounded domain; the ledger
adopts it only when the same proposal recurs in `axis_recurrence` stall cycles, and then
only as a canary. An unreachable LLM costs a proposal round (`cycle.py` runs the rounds),
never a submission.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from typing import TYPE_CHECKING

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
from prism_challenge.registry.state import RegistryState, terms_of

if TYPE_CHECKING:  # `openai` is imported where it is called: every `prism` command loads
    import openai  # the registry, and only the research loop talks to an LLM


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


def make_client(llm_settings) -> openai.OpenAI:
    """An OpenAI-compatible client from the `llm` settings; the key only from the env.
    No retries inside the client: the research loop backs off between cycles instead."""
    key = os.environ.get(llm_settings.api_key_env)
    if not key:
        raise ValueError(
            f"llm.enabled is true but the environment variable {llm_settings.api_key_env} "
            "(llm.api_key_env) is not set; set it, or set llm.enabled: false to run without "
            "the LLM (no review, no research proposals)"
        )
    import openai

    return openai.OpenAI(
        base_url=llm_settings.base_url, api_key=key, timeout=llm_settings.timeout_s,
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


def brief(state: RegistryState, cfg, *, wanted: int) -> str:
    """What the LLM is shown: the schema, every claim (archived ones too, so it does not
    propose them again) and progress. Only registry-made text: no miner writes any of it."""
    return json.dumps(
        {
            "wanted": wanted,
            "axes": [{"name": a.name, "kind": a.kind, "arms": a.arms} for a in state.schema()],
            "hypotheses": [
                {"id": h.id, "statement": h.statement, "status": h.status,
                 "mean": round(terms_of(h, cfg).mean, 3), "n": h.n}
                for h in state.hypotheses.values()
            ],
            "best_bpb": state.best_bpb,
            "observations": state.n_obs,
            "stalled_for": state.since_best,
        },
        sort_keys=True,
    )


HYPOTHESIS_PROMPT = (
    "You propose falsifiable hypotheses about which design axes make a small language model "
    "learn faster from scratch (lower prequential bits per byte). Use only the axes and arms "
    "given; propose at most `wanted` claims, none that is already listed. Answer with JSON "
    "{\"hypotheses\": [{\"spec\": {...}, \"importance\": 0..1, "
    "\"rationale\": str, \"parent\": id|null}]} where spec is one of "
    "{\"kind\":\"single\",\"axis\",\"treatment\",\"control\"}, "
    "{\"kind\":\"threshold\",\"axis\",\"threshold\",\"better\":\"above\"|\"below\"}, "
    "{\"kind\":\"interaction\",\"axis_a\",\"a1\",\"a0\",\"axis_b\",\"b1\",\"b0\"}."
)
AXIS_PROMPT = (
    "Progress has stalled. Propose at most `wanted` new design axes miners could declare in "
    "prism.toml. "
    "Answer with JSON {\"axes\": [{\"spec\": {\"name\", \"kind\": int|float|logfloat|"
    "categorical, \"low\", \"high\", \"edges\", \"values\" (<= 8), \"description\"}, "
    "\"treatment\": arm, \"control\": arm, \"rationale\": str}]}."
)


class LlmFailure(RuntimeError):
    """No usable answer this time: the endpoint is down, timed out, or sent garbage."""


def ask(client: openai.OpenAI, llm, system: str, user: str, name: str) -> list:
    """The `name` list of the LLM's JSON answer; `LlmFailure` says why there is none.
    `llm` is the `llm` settings section (model, response format, token and time limits)."""
    fmt = {"type": "json_object"} if llm.response_format == "json_object" else {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "schema": {"type": "object", "properties": {name: {"type": "array"}},
                       "required": [name]},
        },
    }
    import openai

    try:
        response = client.chat.completions.create(
            model=llm.model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            response_format=fmt,
            temperature=llm.temperature,
            max_tokens=llm.max_output_tokens,
        )
    except openai.APITimeoutError:
        raise LlmFailure(f"timeout after {llm.timeout_s:g}s") from None
    except openai.OpenAIError as exc:
        raise LlmFailure(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if not response.choices or not response.choices[0].message.content:
        raise LlmFailure("the endpoint answered with no content")
    try:
        doc = json.loads(response.choices[0].message.content)
    except ValueError as exc:
        raise LlmFailure(f"the answer is not JSON: {str(exc)[:200]}") from None
    items = doc.get(name) if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise LlmFailure(f"the answer has no {name!r} list")
    return items
