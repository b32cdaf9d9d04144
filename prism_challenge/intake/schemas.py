"""The JSON bodies of the submissions API, shared by the validator and the miner's client."""

from __future__ import annotations

from pydantic import BaseModel


class Receipt(BaseModel):
    """The answer to an accepted (201) or repeated (200, `idempotent`) submission."""

    id: int
    digest: str
    hotkey: str
    status: str
    accepted_at: float
    block: int | None
    idempotent: bool


class ScoreView(BaseModel):
    bpb: float
    heldout_delta: float
    eligible: bool
    reason: str | None
    corpus: str


class VerificationView(BaseModel):
    """The contender replay: only a run whose replay passed may take weight."""

    status: str  # queued | running | passed | failed
    reason: str | None


class SubmissionView(BaseModel):
    """What anyone may read about a submission (never its source)."""

    id: int
    hotkey: str
    digest: str
    name: str | None
    status: str
    final: bool
    reason: str | None
    attempts: int
    accepted_at: float
    block: int | None
    score: ScoreView | None
    verification: VerificationView | None = None  # None: not a contender (not replayed)
