"""Weights: leaderboard + payout split -> uids -> u16 vector; dry-run unless unlocked."""

from prism_challenge.weights.plan import WeightPlan, build_plan, load_plan
from prism_challenge.weights.split import Payout, split_payout

__all__ = ["Payout", "WeightPlan", "build_plan", "load_plan", "split_payout"]
