"""What the dashboard pages show, read from the store in one session per page.

A SQLite session takes the write lock up front (`BEGIN IMMEDIATE`), so a page that opened
one per panel would queue behind the workers several times; each loader here runs inside the
single session its route opens and returns plain frozen values.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.chain.metagraph import MetagraphView, registered_among
from prism_challenge.config.settings import Settings
from prism_challenge.dashboard.journal_page import JournalView
from prism_challenge.dashboard.records import RunDigest
from prism_challenge.registry.credit import credit_table
from prism_challenge.registry.service import journal_page, read_state
from prism_challenge.scoring.leaderboard import Leaderboard, build_leaderboard
from prism_challenge.storage.lifecycle import FINAL, Status
from prism_challenge.storage.tables import Equivocation, RegistryHypothesis, Score, Submission
from prism_challenge.weights.plan import WeightPlan, build_plan
from prism_challenge.weights.research import session_credit

OPEN = tuple(s.value for s in Status if s not in FINAL)
_ROW_COLUMNS = (
    Submission.id,
    Submission.name,
    Submission.hotkey,
    Submission.digest,
    Submission.status,
    Submission.reason,
    Submission.attempts,
    Submission.reviewed,
    Submission.accepted_at,
    Submission.updated_at,
    Submission.block,
)


@dataclass(frozen=True)
class SubmissionRow:
    """A submission without its bundle bytes (the dashboard never needs them)."""

    id: int
    name: str | None
    hotkey: str
    digest: str
    status: str
    reason: str | None
    attempts: int
    reviewed: str
    accepted_at: float
    updated_at: float
    block: int | None


@dataclass(frozen=True)
class Overview:
    counts: dict[str, int]  # every status, zero included
    board: Leaderboard
    corpora: list[str]  # every corpus something was scored on
    plan: WeightPlan | None
    plan_error: str | None
    queue: list[SubmissionRow]  # open ones oldest first, then the latest final ones
    hypotheses: list[dict]  # the registry's materialised rows (posteriors panel input)
    research_credit: dict[str, float] = field(default_factory=dict)  # hotkey -> pot share
    # proofs of equivocation in force: (validator, run digest, excluded until)
    equivocations: list[tuple[str, str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class ScoreView:
    bpb: float
    heldout_delta: float
    eligible: bool
    reason: str | None
    corpus: str
    detail: dict
    created_at: float


@dataclass(frozen=True)
class SubmissionHead:
    row: SubmissionRow
    score: ScoreView | None


@dataclass(frozen=True)
class SubmissionView:
    row: SubmissionRow
    score: ScoreView | None
    runs: list[RunDigest]  # every attempt, first first


def status_counts(session: Session) -> dict[str, int]:
    found = dict(
        session.execute(select(Submission.status, func.count()).group_by(Submission.status)).all()
    )
    return {s.value: int(found.get(s.value, 0)) for s in Status}


def load_queue(session: Session, limit: int) -> list[SubmissionRow]:
    """Open submissions (oldest first), then the most recently finished, `limit` in all."""
    rows = session.execute(
        select(*_ROW_COLUMNS)
        .where(Submission.status.in_(OPEN))
        .order_by(Submission.accepted_at, Submission.id)
        .limit(limit)
    ).all()
    if len(rows) < limit:
        rows += session.execute(
            select(*_ROW_COLUMNS)
            .where(Submission.status.not_in(OPEN))
            .order_by(Submission.updated_at.desc(), Submission.id.desc())
            .limit(limit - len(rows))
        ).all()
    return [SubmissionRow(*r) for r in rows]


def load_overview(
    session: Session,
    settings: Settings,
    metagraph: MetagraphView,
    *,
    corpus: str | None = None,
    research_credit: Mapping[str, float] | None = None,
    queue_rows: int = 200,
    hotkey: str | None = None,
    now: float | None = None,
) -> Overview:
    """Everything the overview page shows; the scored entries are read once for both the
    leaderboard and the weights plan (with this validator's `hotkey`, the shared-input
    aggregate the weights are set from: agreement/ranking.py). `research_credit` defaults
    to the registry's stored credit (read in this transaction, and only when
    `weights.research_share > 0`)."""
    credit_error = None
    if research_credit is None:
        try:
            research_credit = session_credit(session, settings)
        except ValueError as exc:  # e.g. a ledger the registry refuses to replay
            research_credit, credit_error = {}, f"research credit unavailable: {exc}"
    ranked = ranked_entries(session, settings, hotkey, now=now)
    entries = ranked.entries
    corpus = ranked.corpus if corpus is None else corpus  # the key weights are set on
    board = build_leaderboard(
        entries,
        epsilon=settings.scoring.epsilon_bpb,
        margin=settings.scoring.dethrone_margin,
        z=settings.scoring.dethrone_z,
        corpus=corpus,
        hotkeys=registered_among(metagraph, {e.hotkey for e in entries}),
    )
    plan, plan_error = None, None
    try:
        plan = build_plan(
            entries, metagraph, settings, research_credit=research_credit, corpus=corpus
        )
    except ValueError as exc:  # a misconfigured burn uid: show it, keep the rest of the page
        plan_error = str(exc)
    if credit_error is not None:  # a plan without the research share would be wrong
        plan, plan_error = None, credit_error
    hypotheses = [
        r.detail
        for r in session.execute(select(RegistryHypothesis).order_by(RegistryHypothesis.id))
        .scalars()
    ]
    return Overview(
        counts=status_counts(session),
        board=board,
        corpora=sorted({e.corpus for e in entries}),
        plan=plan,
        plan_error=plan_error,
        queue=load_queue(session, queue_rows),
        hypotheses=hypotheses,
        research_credit=dict(research_credit or {}),
        equivocations=[(r.validator, r.digest, r.until) for r in session.scalars(
            select(Equivocation).where(Equivocation.until > (time.time() if now is None
                                                             else now))
            .order_by(Equivocation.id))],
    )


def load_journal(session: Session, settings: Settings, *, offset: int, limit: int
                 ) -> JournalView:
    """The journal page: entries from the store, credit and notes from the registry's stored
    state (read as it is; nothing is seeded)."""
    total, entries = journal_page(session, offset=offset, limit=limit)
    try:
        state, error = read_state(session, settings.registry), None
    except ValueError as exc:  # a ledger the registry refuses to replay: show the journal
        state, error = None, f"registry state unavailable: {exc}"
    credit = [] if state is None else credit_table(state, settings.registry)
    notes = {} if state is None else {
        hid: (state.hypotheses[hid].statement, items) for hid, items in state.notes.items()
    }
    return JournalView(total=total, offset=offset, entries=entries, credit=credit,
                       credit_cap=settings.registry.credit_cap, notes=notes, error=error)


def load_submission(session: Session, submission_id: int) -> SubmissionHead | None:
    """One submission with its score (its runs: `RecordCache.read`), or None."""
    found = session.execute(select(*_ROW_COLUMNS).where(Submission.id == submission_id)).first()
    if found is None:
        return None
    score = session.get(Score, submission_id)
    return SubmissionHead(
        row=SubmissionRow(*found),
        score=None
        if score is None
        else ScoreView(
            bpb=score.bpb,
            heldout_delta=score.heldout_delta,
            eligible=score.eligible,
            reason=score.reason,
            corpus=score.corpus,
            detail=dict(score.detail),
            created_at=score.created_at,
        ),
    )
