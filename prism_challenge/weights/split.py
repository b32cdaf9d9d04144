"""The payout split (docs/scoring.md): who gets which fraction of this validator's weight.

The leader gets `winner_share`; `research_share` is divided among hotkeys in proportion to
the research credit the caller passes (the registry's hook; empty by default); whatever is
left (both shares below 1, or nobody to pay) goes to the burn uid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict


class Payout(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    winner: dict[str, float]  # hotkey -> share for leading the competition
    research: dict[str, float]  # hotkey -> share from research credit
    burn: float  # share sent to the burn uid


def split_payout(
    leader: str | None,
    research_credit: Mapping[str, float],
    *,
    winner_share: float,
    research_share: float,
) -> Payout:
    """Shares summing to 1. Credits must be finite and >= 0; zero credits get nothing."""
    if not 0 <= winner_share <= 1 or not 0 <= research_share <= 1:
        raise ValueError("winner_share and research_share must each lie in [0, 1]")
    if winner_share + research_share > 1 + 1e-12:
        raise ValueError(
            f"winner_share {winner_share} + research_share {research_share} exceeds 1"
        )
    for hotkey, credit in research_credit.items():
        if not math.isfinite(credit) or credit < 0:
            raise ValueError(f"research credit of {hotkey} must be finite and >= 0, not {credit}")
    winner = {leader: winner_share} if leader is not None and winner_share > 0 else {}
    total = math.fsum(research_credit.values())
    research = (
        {hk: research_share * c / total for hk, c in research_credit.items() if c > 0}
        if total > 0 and research_share > 0
        else {}
    )
    assigned = math.fsum([*winner.values(), *research.values()])
    burn = 1.0 - assigned
    return Payout(winner=winner, research=research, burn=burn if burn > 1e-12 else 0.0)
