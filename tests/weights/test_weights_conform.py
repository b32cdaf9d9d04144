"""`as_sent` against the chain's exact `max_weight_limit` test: the vector sent is one the
chain accepts (max * 65535 <= limit * sum, in integers), and one the library, handed it,
sends unchanged; a plan no vector can carry under the cap is refused with the reason."""

from __future__ import annotations

import random

import pytest
from bittensor.intents.weights import clip_to_max_weight, normalize

from prism_challenge.chain.subtensor import WeightsRules
from prism_challenge.weights.conform import WeightsImpossible, as_sent
from prism_challenge.weights.plan import WeightPlan


def plan(uids: list[int], weights: list[int]) -> WeightPlan:
    return WeightPlan(netuid=7, block=1, corpus="demo", dry_run=False, leader=None,
                      uids=uids, weights_u16=weights, rows=[], excluded=[])


def capped(limit: int) -> WeightsRules:
    return WeightsRules(block=1, rate_limit=0, commit_reveal=False, min_version_key=0,
                        max_weight_limit=limit)


def accepted(values: list[int], limit: int) -> bool:
    """subtensor's check_vec_max_limited, exactly."""
    return max(values) * 65535 <= limit * sum(values)


def library_keeps(uids: list[int], values: list[int], limit: int) -> bool:
    """bittensor's SetWeights conforms what it is given: it must send these values as they are."""
    return normalize(uids, clip_to_max_weight([float(v) for v in values], limit / 65535)) == (
        uids, values)


LEADER_AND_BURN = plan([0, 2], [7282, 65535])  # 10% burn, 90% leader


@pytest.mark.parametrize(("limit", "sent", "library_alone"), [
    (32768, [65534, 65535], [65533, 65535]),
    (32769, [65530, 65535], [65529, 65535]),
])
def test_a_cap_the_librarys_rounding_overshoots_gets_the_nearest_vector_the_chain_accepts(
        limit, sent, library_alone):
    assert normalize([0, 2], clip_to_max_weight([7282.0, 65535.0], limit / 65535))[1] == (
        library_alone)
    assert not accepted(library_alone, limit)  # MaxWeightExceeded on chain
    out = as_sent(LEADER_AND_BURN, capped(limit), self_uid=1)
    assert out.weights_u16 == sent and accepted(sent, limit)
    assert library_keeps(out.uids, out.weights_u16, limit)


def test_every_cap_above_half_gets_a_vector_the_chain_accepts():
    refused_before = 0
    for limit in range(32768, 65535, 7):
        out = as_sent(LEADER_AND_BURN, capped(limit), self_uid=1)
        assert accepted(out.weights_u16, limit), limit
        assert library_keeps(out.uids, out.weights_u16, limit), limit
        alone = normalize([0, 2], clip_to_max_weight([7282.0, 65535.0], limit / 65535))[1]
        refused_before += not accepted(alone, limit)
    assert refused_before > 1000  # of 4681 caps: the library's vector alone fails often


def test_plans_of_many_uids_under_random_caps_pass_or_are_impossible():
    rng = random.Random(7)
    for _ in range(400):
        k = rng.randint(2, 30)
        uids = sorted(rng.sample(range(256), k))
        weights = [rng.randint(1, 65535) for _ in uids]
        weights[rng.randrange(k)] = 65535
        limit = rng.randint(1000, 65534)
        if k * limit < 65535:
            with pytest.raises(WeightsImpossible, match="max_weight_limit"):
                as_sent(plan(uids, weights), capped(limit), self_uid=None)
            continue
        out = as_sent(plan(uids, weights), capped(limit), self_uid=None)
        assert out.uids == uids and accepted(out.weights_u16, limit)
        assert library_keeps(out.uids, out.weights_u16, limit)


def test_two_uids_under_half_a_cap_are_refused_with_the_reason():
    with pytest.raises(WeightsImpossible) as refused:
        as_sent(LEADER_AND_BURN, capped(32767), self_uid=1)
    assert str(refused.value) == (
        "netuid 7 caps a share at max_weight_limit 32767/65535, so a vector needs at least 3 "
        "non-zero weights; this plan pays 2 uid(s): the subnet owner must raise the cap, or "
        "more miners must score")


def test_equal_weights_exactly_at_the_cap_pass():
    out = as_sent(plan([0, 1, 2], [65535, 65535, 65535]), capped(21845), self_uid=None)
    assert out.weights_u16 == [65535, 65535, 65535] and accepted(out.weights_u16, 21845)


def test_a_lone_self_weight_is_exempt_from_the_cap():
    out = as_sent(plan([1], [65535]), capped(100), self_uid=1)
    assert (out.uids, out.weights_u16) == ([1], [65535])
