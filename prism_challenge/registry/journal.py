"""The journal: one entry per research cycle (answered or failed) and per operator note.

Entries are folded from the ledger like everything else (`apply_cycle`, `apply_note`), so a
replay writes the same journal. A cycle's entry says what the LLM proposed and what the
gates decided (and why), which claims entered, which claims moved since the previous
answered cycle (posterior mean, evidence count, status) with the submissions whose
contrasts moved them, and which axes were adopted, promoted or reverted. A failed cycle's
entry says why it failed and changes nothing else: the beliefs it would have reported stay
pending for the next answered cycle.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from prism_challenge.registry.axes import DEFAULT_AXES
from prism_challenge.registry.state import CycleMarks, RegistryState, terms_of

JOURNAL_TAIL = 8  # entries kept in the state; the store keeps all of them
NOTES_MAX = 20  # annotations kept per hypothesis (oldest dropped)
RUNS_PER_CLAIM = 12  # contrasts linked per moved claim in one entry
PROPOSAL_CHARS = 2000


class Verdict(BaseModel):
    """One proposal and what the gates made of it."""

    model_config = ConfigDict(extra="forbid")

    proposal: object  # the raw item the LLM sent (bounded when serialised)
    accepted: str | None = None  # the hypothesis id or axis name it became
    reason: str = Field("", max_length=300)

    @field_validator("proposal")
    @classmethod
    def _bounded(cls, v: object) -> object:
        if len(json.dumps(v, default=str)) > PROPOSAL_CHARS:
            raise ValueError(f"a proposal is recorded up to {PROPOSAL_CHARS} characters")
        return v


class CycleRecord(BaseModel):
    """The payload of a ``cycle`` ledger event."""

    model_config = ConfigDict(extra="forbid")

    trigger: Literal["scored", "startup"]
    time: float = Field(ge=0)
    model: str = Field("", max_length=200)
    error: str | None = Field(None, max_length=500)
    stalled: bool = False
    stall_cycle: int = Field(0, ge=0)
    skipped: str = Field("", max_length=200)  # why hypotheses were not asked for
    hypotheses: list[Verdict] = Field([], max_length=16)
    axes: list[Verdict] = Field([], max_length=16)


def apply_cycle(state: RegistryState, payload: dict, cfg) -> None:
    rec = CycleRecord.model_validate(payload)
    base = {"trigger": rec.trigger, "time": rec.time, "model": rec.model, "at": state.n_obs}
    if rec.error is not None:
        state.cycle_failures += 1
        state.failure_streak += 1
        _append(state, {"kind": "cycle_failed", **base, "error": rec.error,
                        "failures": state.cycle_failures, "streak": state.failure_streak})
        return
    state.cycles += 1
    state.failure_streak = 0
    state.cycle_obs = state.n_obs
    new, moved, axes = _since_marks(state, cfg)
    _append(state, {
        "kind": "cycle", **base, "cycle": state.cycles, "stalled": rec.stalled,
        "stall_cycle": rec.stall_cycle, "skipped": rec.skipped,
        "proposed": [v.model_dump() for v in rec.hypotheses],
        "axes_proposed": [v.model_dump() for v in rec.axes],
        "new": new, "moved": moved, "axes": axes,
    })
    state.marks = _marks(state, cfg)
    state.contrasts = []


def apply_note(state: RegistryState, payload: dict) -> None:
    hid = payload.get("hypothesis")
    text = payload.get("text")
    if hid not in state.hypotheses:
        raise ValueError(f"unknown hypothesis {hid!r}")
    if not isinstance(text, str) or not 1 <= len(text.strip()) <= 500:
        raise ValueError("the text must hold 1 to 500 characters")
    if any(ord(ch) < 32 for ch in text):
        raise ValueError("the text must be one line without control characters")
    note = {"text": text.strip(), "at": state.n_obs, "time": float(payload.get("time", 0.0))}
    notes = state.notes.setdefault(hid, [])
    notes.append(note)
    del notes[: max(len(notes) - NOTES_MAX, 0)]
    _append(state, {"kind": "note", "hypothesis": hid,
                    "statement": state.hypotheses[hid].statement, **note})


def _append(state: RegistryState, entry: dict) -> None:
    state.journal_n += 1
    state.journal.append({"n": state.journal_n, **entry})
    del state.journal[: max(len(state.journal) - JOURNAL_TAIL, 0)]


def _flag(h) -> str:
    return h.status + ("/archived" if h.archived else "")


def _marks(state: RegistryState, cfg) -> CycleMarks:
    hyps = state.hypotheses.values()
    return CycleMarks(
        means={h.id: round(terms_of(h, cfg).mean, 4) for h in hyps},
        n={h.id: h.gain_n for h in hyps},
        status={h.id: _flag(h) for h in hyps},
        axes=dict(state.axis_status),
    )


def _since_marks(state: RegistryState, cfg) -> tuple[list, list, list]:
    """(claims that entered, claims that moved, axes whose status changed) since the
    previous answered cycle."""
    marks = state.marks
    runs: dict[str, list] = {}
    for at, hid, outcome, sids in state.contrasts:
        runs.setdefault(hid, []).append({"at": at, "outcome": outcome, "submissions": sids})
    new, moved = [], []
    for hid, h in sorted(state.hypotheses.items()):
        if hid not in marks.means:
            new.append({"id": hid, "statement": h.statement, "origin": h.origin})
        mean = round(terms_of(h, cfg).mean, 4)
        before_n = marks.n.get(hid, 0)
        before_status = marks.status.get(hid, "new")
        if h.gain_n == before_n and _flag(h) == before_status:
            continue
        linked = runs.get(hid, [])
        moved.append({
            "id": hid, "statement": h.statement,
            "mean": [marks.means.get(hid, 0.5), mean],
            "contrasts": [before_n, h.gain_n],
            "status": [before_status, _flag(h)],
            "runs": linked[-RUNS_PER_CLAIM:], "runs_left_out": max(len(linked) - RUNS_PER_CLAIM, 0),
        })
    before_axes = marks.axes or {a.name: "active" for a in DEFAULT_AXES}
    axes = [
        {"name": name, "status": [before_axes.get(name, "new"), status]}
        for name, status in sorted(state.axis_status.items())
        if before_axes.get(name, "new") != status
    ]
    return new, moved, axes
