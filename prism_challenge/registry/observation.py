"""What the validator hands the registry for every scored submission."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, field_validator

from prism_challenge.sandbox.record import MeasuredAxes


class Observation(BaseModel):
    """One scored submission. `measured` is the run record's `axes`; `declared` is the
    bundle's `prism.toml` [axes] table as a plain dict; ineligible (zeroed) runs are kept in
    the ledger but are never evidence or references. A `censored` run was stopped early:
    `bpb` is only a lower bound on its score, so it certifies "no new best" (the stall
    count) but is never a contrast's partner, whose gain needs a full bpb. `competition`:
    the key its score is kept under (`RunRecord.competition`); runs under other terms are
    never compared (None: an observation made before keys, compared as before)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    submission_id: int = Field(ge=0)
    hotkey: str = Field(min_length=1, max_length=64)
    digest: str = Field(min_length=1, max_length=64)
    measured: MeasuredAxes | None = None
    declared: dict = {}
    bpb: float
    eligible: bool
    censored: bool = False
    accepted_at: float = Field(ge=0)
    competition: str | None = Field(None, max_length=32)

    @field_validator("bpb")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v) or v < 0:
            raise ValueError("bpb must be a finite non-negative number")
        return v
