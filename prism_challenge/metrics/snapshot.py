"""The numbers `/metrics` exposes, read from the store in one session per scrape.

Counts come from the store rather than from in-process counters so that every process of
a node (API, workers) reports the same truth, and a restart loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.scoring.leaderboard import build_leaderboard
from prism_challenge.scoring.queries import load_entries
from prism_challenge.storage.tables import RunRecord, Score, Submission


@dataclass(frozen=True)
class LastRun:
    submission_id: int
    attempt: int
    exit_reason: str
    created_at: float
    startup_s: float
    train_s: float
    eval_s: float

    @property
    def duration_s(self) -> float:
        return self.startup_s + self.train_s + self.eval_s


@dataclass(frozen=True)
class StoreSnapshot:
    submissions: dict[str, int]  # status -> count (statuses present in the store)
    attempts: int  # sum of attempts: runs started, including ones still running
    scored: dict[tuple[str, bool], int]  # (corpus, eligible) -> count
    runs: dict[str, int]  # exit reason -> run records
    last_run: LastRun | None
    leaders: dict[str, float]  # corpus -> the leader's bpb


def _field(name: str):
    return RunRecord.record[name]


def read_snapshot(session: Session, scoring: ScoringSettings) -> StoreSnapshot:
    submissions = dict(
        session.execute(select(Submission.status, func.count()).group_by(Submission.status)).all()
    )
    attempts = session.execute(select(func.coalesce(func.sum(Submission.attempts), 0))).scalar()
    scored = {
        (corpus, bool(eligible)): n
        for corpus, eligible, n in session.execute(
            select(Score.corpus, Score.eligible, func.count()).group_by(
                Score.corpus, Score.eligible
            )
        ).all()
    }
    reason = _field("exit_reason").as_string()
    runs = dict(session.execute(select(reason, func.count()).group_by(reason)).all())
    last = session.execute(
        select(
            RunRecord.submission_id,
            RunRecord.attempt,
            reason,
            RunRecord.created_at,
            _field("startup_s").as_float(),
            _field("train_s").as_float(),
            _field("eval_s").as_float(),
        )
        .order_by(RunRecord.created_at.desc(), RunRecord.id.desc())
        .limit(1)
    ).first()
    entries = load_entries(session)
    leaders = {}
    for corpus in sorted({e.corpus for e in entries}):
        board = build_leaderboard(
            entries, epsilon=scoring.epsilon_bpb, margin=scoring.dethrone_margin, corpus=corpus
        )
        if board.leader is not None:
            leaders[corpus] = board.leader.bpb
    return StoreSnapshot(
        submissions={str(k): int(v) for k, v in submissions.items()},
        attempts=int(attempts),
        scored=scored,
        runs={str(k or "unknown"): int(v) for k, v in runs.items()},
        last_run=None
        if last is None
        else LastRun(
            submission_id=last[0],
            attempt=last[1],
            exit_reason=str(last[2] or "unknown"),
            created_at=last[3],
            startup_s=float(last[4] or 0.0),
            train_s=float(last[5] or 0.0),
            eval_s=float(last[6] or 0.0),
        ),
        leaders=leaders,
    )
