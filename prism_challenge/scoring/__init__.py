"""Scoring: run record -> score (measures, gap penalty, anti-cheat gates) -> leaderboard."""

from prism_challenge.scoring.leaderboard import Entry, Leaderboard, build_leaderboard
from prism_challenge.scoring.measures import ScoringError
from prism_challenge.scoring.persist import ScoreExists, record_score
from prism_challenge.scoring.queries import load_entries, load_leaderboard
from prism_challenge.scoring.score import ScoreResult, score_record

__all__ = [
    "Entry",
    "Leaderboard",
    "ScoreExists",
    "ScoreResult",
    "ScoringError",
    "build_leaderboard",
    "load_entries",
    "load_leaderboard",
    "record_score",
    "score_record",
]
