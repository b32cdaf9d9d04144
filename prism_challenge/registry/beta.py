"""Beta-Binomial evidence terms of one hypothesis, exact from the regularised incomplete
beta function (`scipy.special`, the same kernels `scipy.stats.beta` calls, without the
seconds `scipy.stats` adds to every process that opens the registry, `prism` included).

theta is the probability that a relevant submission wins its matched contrast (see
`evidence.py`); the claim is theta > 1/2. With prior Beta(2, 2) and w wins, l losses the
posterior is Beta(2 + w, 2 + l). Everything here is a pure function of (w, l) and the
configured thresholds, so replaying a ledger reproduces every number.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

PRIOR_A = 2.0
PRIOR_B = 2.0


@dataclass(frozen=True)
class Terms:
    n: int
    mean: float
    ci90: tuple[float, float]
    p_support: float  # Pr(theta > support_theta)
    p_refute: float  # Pr(theta < refute_theta)
    rope: float  # Pr(rope_low <= theta <= rope_high)
    p_claim: float  # Pr(theta > 1/2): the probability the claim's direction is right


@lru_cache(maxsize=8192)  # a pure function of small integers; allocation asks it often
def terms(
    wins: int,
    losses: int,
    *,
    support_theta: float = 0.6,
    refute_theta: float = 0.4,
    rope: tuple[float, float] = (0.45, 0.55),
) -> Terms:
    # scipy belongs to the [validator] extra: a miner's `prism check` imports the registry
    # (for the declared axes) but never asks for a posterior.
    from scipy.special import betainc, betaincc, betaincinv

    if wins < 0 or losses < 0:
        raise ValueError("wins and losses must be >= 0")
    a, b = PRIOR_A + wins, PRIOR_B + losses
    return Terms(
        n=wins + losses,
        mean=a / (a + b),
        ci90=(float(betaincinv(a, b, 0.05)), float(betaincinv(a, b, 0.95))),
        p_support=float(betaincc(a, b, support_theta)),
        p_refute=float(betainc(a, b, refute_theta)),
        rope=float(betainc(a, b, rope[1]) - betainc(a, b, rope[0])),
        p_claim=float(betaincc(a, b, 0.5)),
    )


def status_of(t: Terms, *, decide_prob: float = 0.9, min_n: int = 10) -> str:
    """supported / refuted once the support / refute probability reaches decide_prob with
    at least min_n contrasts; otherwise active."""
    if t.n >= min_n and t.p_support >= decide_prob:
        return "supported"
    if t.n >= min_n and t.p_refute >= decide_prob:
        return "refuted"
    return "active"


def information_value(t: Terms) -> float:
    """4 P (1 - P) with P = Pr(theta > 1/2): 1 when the direction is a coin flip, 0 when
    it is certain, so settled claims stop drawing submissions."""
    return 4.0 * t.p_claim * (1.0 - t.p_claim)


def credibility(n: int, ramp_n: int = 12) -> float:
    """LLM-proposed hypotheses earn trust with evidence: 0.25 at n=0, linear to 1 at ramp_n."""
    return 0.25 + 0.75 * min(max(n, 0), ramp_n) / ramp_n
