"""The numbers `/metrics` exposes, read from the store in one session per scrape.

Counts come from the store rather than from in-process counters so that every process of
a node (API, workers) reports the same truth, and a restart loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.metrics.runs import RunSummary, RunTally
from prism_challenge.scoring.leaderboard import build_leaderboard
from prism_challenge.scoring.queries import load_entries
from prism_challenge.storage.tables import RegistryJournal, Score, Submission


@dataclass(frozen=True)
class StoreSnapshot:
    submissions: dict[str, int]  # status -> count (statuses present in the store)
    attempts: int  # sum of attempts: runs started, including ones still running
    scored: dict[tuple[str, bool], int]  # (corpus, eligible) -> count
    runs: RunSummary  # run records by exit reason, and the latest one
    leaders: dict[str, float]  # corpus -> the leader's bpb
    research_cycles: dict[str, int]  # "answered" / "failed" -> research cycles journalled


def read_snapshot(session: Session, scoring: ScoringSettings, runs: RunTally) -> StoreSnapshot:
    submissions = session.execute(
        select(Submission.status, func.count()).group_by(Submission.status)
    ).all()
    attempts = session.execute(select(func.coalesce(func.sum(Submission.attempts), 0))).scalar()
    scored = session.execute(
        select(Score.corpus, Score.eligible, func.count()).group_by(Score.corpus, Score.eligible)
    ).all()
    cycles = dict(session.execute(
        select(RegistryJournal.kind, func.count()).group_by(RegistryJournal.kind)).all())
    entries = load_entries(session)
    leaders = {}
    for corpus in sorted({e.corpus for e in entries}):
        board = build_leaderboard(
            entries, epsilon=scoring.epsilon_bpb, margin=scoring.dethrone_margin, corpus=corpus,
            z=scoring.dethrone_z,
        )
        if board.leader is not None:
            leaders[corpus] = board.leader.bpb
    return StoreSnapshot(
        submissions={str(status): int(n) for status, n in submissions},
        attempts=int(attempts),
        scored={(corpus, bool(eligible)): int(n) for corpus, eligible, n in scored},
        runs=runs.update(session),
        leaders=leaders,
        research_cycles={"answered": int(cycles.get("cycle", 0)),
                         "failed": int(cycles.get("cycle_failed", 0))},
    )
