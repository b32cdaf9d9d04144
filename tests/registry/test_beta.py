"""The evidence terms against closed forms worked out by hand (not against scipy itself)."""

import pytest

from prism_challenge.registry.beta import credibility, information_value, status_of, terms


def beta22_cdf(x):  # Beta(2,2): F(x) = 3x^2 - 2x^3
    return 3 * x**2 - 2 * x**3


def test_prior_terms_match_closed_form():
    t = terms(0, 0)
    assert t.mean == 0.5
    assert t.p_support == pytest.approx(1 - beta22_cdf(0.6))  # 0.352
    assert t.p_support == pytest.approx(0.352)
    assert t.p_refute == pytest.approx(0.352)
    assert t.rope == pytest.approx(beta22_cdf(0.55) - beta22_cdf(0.45))  # 0.1495
    assert t.rope == pytest.approx(0.1495)
    assert t.p_claim == pytest.approx(0.5)
    lo, hi = t.ci90
    assert beta22_cdf(lo) == pytest.approx(0.05, abs=1e-9)
    assert beta22_cdf(hi) == pytest.approx(0.95, abs=1e-9)
    assert lo == pytest.approx(0.135350, abs=1e-5)
    assert hi == pytest.approx(1 - 0.135350, abs=1e-5)


def test_ten_straight_wins():
    # Beta(12, 2): F(x) = 13 x^12 - 12 x^13
    t = terms(10, 0)
    assert t.mean == pytest.approx(12 / 14)
    assert t.p_support == pytest.approx(1 - (13 * 0.6**12 - 12 * 0.6**13))  # 0.98737
    assert t.p_support == pytest.approx(0.98737, abs=1e-5)
    assert status_of(t) == "supported"
    mirrored = terms(0, 10)
    assert mirrored.p_refute == pytest.approx(t.p_support)
    assert status_of(mirrored) == "refuted"


def test_status_needs_ten_contrasts_and_ninety_percent():
    assert terms(9, 0).p_support > 0.9
    assert status_of(terms(9, 0)) == "active"  # n = 9 < 10
    assert status_of(terms(7, 3)) == "active"  # P(theta > 0.6) ~ 0.6
    assert status_of(terms(30, 10)) == "supported"
    assert status_of(terms(5, 5)) == "active"


def test_information_value_and_credibility_ramp():
    assert information_value(terms(0, 0)) == pytest.approx(1.0)
    assert information_value(terms(20, 0)) < 0.01
    assert credibility(0) == 0.25
    assert credibility(6) == pytest.approx(0.625)
    assert credibility(12) == 1.0
    assert credibility(40) == 1.0


def test_negative_counts_are_refused():
    with pytest.raises(ValueError):
        terms(-1, 0)


def test_terms_equal_scipy_stats_beta_to_the_bit():
    """The incomplete-beta kernels give exactly what `scipy.stats.beta` gives, so a ledger
    folded before the switch replays to the same numbers and digests."""
    from scipy.stats import beta as dist_of

    for wins, losses in [(0, 0), (1, 0), (3, 9), (12, 0), (40, 37), (250, 180), (7, 600)]:
        t, d = terms(wins, losses), dist_of(2 + wins, 2 + losses)
        assert t.ci90 == tuple(float(x) for x in d.ppf([0.05, 0.95]))
        assert t.p_support == float(d.sf(0.6)) and t.p_refute == float(d.cdf(0.4))
        assert t.p_claim == float(d.sf(0.5))
        assert t.rope == float(d.cdf(0.55) - d.cdf(0.45))
