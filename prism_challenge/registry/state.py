"""The registry's state: a plain, JSON-serialisable value that the ledger folds into.

`RegistryState` holds no clock and no randomness; `ledger.apply` is the only thing that
changes it. It is snapshotted in the store so that a new observation costs one fold step,
and can always be rebuilt from the ledger from scratch.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from prism_challenge.registry.axes import DEFAULT_AXES, AxisSpec
from prism_challenge.registry.beta import Terms, terms
from prism_challenge.registry.hypotheses import HypothesisSpec, statement


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HypState(_M):
    id: str
    spec: HypothesisSpec
    origin: str  # seed | llm | canary
    importance: float
    parent: str | None = None
    rationale: str = ""
    created_at: int  # observation count when added
    wins: int = 0
    losses: int = 0
    ties: int = 0
    gain_n: int = 0
    gain_sum: float = 0.0
    gain_sq: float = 0.0
    status: str = "active"
    archived: bool = False
    archive_reason: str = ""
    decided_at: int | None = None
    streak: int = 0  # contrasts since reaching min_n without a decision
    canary_axis: str | None = None

    @property
    def statement(self) -> str:
        return statement(self.spec)

    @property
    def n(self) -> int:
        return self.wins + self.losses

    def effect(self) -> tuple[float | None, float | None]:
        """Mean and standard error of the matched bpb gain (bpb units, > 0 favours the claim)."""
        if self.gain_n == 0:
            return None, None
        mean = self.gain_sum / self.gain_n
        if self.gain_n < 2:
            return mean, None
        var = max(self.gain_sq - self.gain_n * mean * mean, 0.0) / (self.gain_n - 1)
        return mean, math.sqrt(var / self.gain_n)


class AxisProposalState(_M):
    spec: AxisSpec
    treatment: str
    control: str
    rationale: str = ""
    cycles: list[int] = []
    adopted: bool = False


class Checkpoint(_M):
    at: int  # observations when written
    moved: dict[str, list[float]]  # hid -> [mean before, mean now]
    eliminated: list[str]
    new: list[str]
    shares: dict[str, list[float]]  # hid -> [share before, share now]


class CycleMarks(_M):
    """What the journal compares a research cycle with: the beliefs at the previous one."""

    means: dict[str, float] = {}
    n: dict[str, int] = {}
    status: dict[str, str] = {}
    axes: dict[str, str] = {}


class RegistryState(_M):
    seq: int = 0  # ledger events applied
    n_obs: int = 0
    n_eligible: int = 0
    n_censored: int = 0  # eligible runs stopped early: stall evidence, never contrasts
    axes: list[AxisSpec] = list(DEFAULT_AXES)
    axis_status: dict[str, str] = {a.name: "active" for a in DEFAULT_AXES}
    hypotheses: dict[str, HypState] = {}
    # "hid|cell|stratum" -> [[hotkey, bpb, run, submission id, design]] (older: first 3)
    queues: dict[str, list[list]] = {}
    recent: list[dict] = []  # last eligible readings, to seed the queues of new hypotheses
    # the competition key of the latest observation: runs are compared within one only
    competition: str | None = None
    best_bpb: float | None = None
    best_arms: dict[str, str] = {}  # the arms of the run that set best_bpb (the leader's design)
    since_best: int = 0
    stall_cycle: int = 0
    axis_proposals: dict[str, AxisProposalState] = {}
    checkpoints: list[Checkpoint] = []
    last_means: dict[str, float] = {}
    last_shares: dict[str, float] = {}
    last_ids: list[str] = []
    last_archived: list[str] = []
    # [observation index, hotkey, points, design, run index] (see credit.py)
    credits: list[list] = []
    requested: dict[str, list[str]] = {}  # hid -> ["cell|stratum"] open when last rendered
    cycles: int = 0  # research cycles that got an answer
    cycle_failures: int = 0  # research cycles the LLM failed (down, timeout, garbage)
    failure_streak: int = 0  # failed cycles since the last one that got an answer
    cycle_obs: int = 0  # n_obs when the last cycle got an answer
    marks: CycleMarks = CycleMarks()  # beliefs at the last cycle: what moved since
    contrasts: list[list] = []  # since the last cycle: [obs, hid, outcome, [submission ids]]
    notes: dict[str, list[dict]] = {}  # hid -> operator annotations, oldest first
    journal_n: int = 0  # journal entries written so far
    journal: list[dict] = []  # the newest entries (the store keeps every one)

    def schema(self) -> list[AxisSpec]:
        """Axes a submission is read on now: active and canary, never reverted."""
        return [a for a in self.axes if self.axis_status.get(a.name) != "reverted"]

    def live(self) -> list[HypState]:
        return [h for h in self.hypotheses.values() if not h.archived]


def terms_of(h: HypState, cfg) -> Terms:
    return terms(
        h.wins,
        h.losses,
        support_theta=cfg.support_theta,
        refute_theta=cfg.refute_theta,
        rope=(cfg.rope_low, cfg.rope_high),
    )
