import random

import pytest
from bittensor.intents import normalize
from weights_entries import entry, make_settings

from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.weights import build_plan, split_payout


def test_winner_takes_all_when_configured(hk):
    mg = StaticMetagraph.of([hk[0], hk[1], hk[2]], block=77)
    plan = build_plan([entry(1, hk[1], 2.0), entry(2, hk[2], 1.0)], mg,
                      make_settings(winner_share=1.0, research_share=0.0))
    assert (plan.uids, plan.weights_u16) == ([2], [65535])
    assert plan.block == 77 and plan.corpus == "demo" and plan.dry_run is True
    assert plan.leader.submission_id == 2
    [row] = plan.rows
    assert (row.uid, row.hotkey, row.share, row.bpb) == (2, hk[2], 1.0, 1.0)
    assert row.reasons == ["leader: submission 2 bpb 1.000000 on demo"]


def test_by_default_a_tenth_goes_to_research_and_is_burned_without_credit(hk):
    mg = StaticMetagraph.of([hk[0], hk[1], hk[2]])
    plan = build_plan([entry(2, hk[2], 1.0)], mg, make_settings())
    # 0.1 / 0.9 * 65535 = 7281.67 -> 7282 to the burn uid 0, 65535 to the leader
    assert (plan.uids, plan.weights_u16) == ([0, 2], [7282, 65535])
    assert plan.rows[0].reasons == ["burn: unassigned share 0.1"]
    paid = build_plan([entry(2, hk[2], 1.0)], mg, make_settings(), research_credit={hk[1]: 1})
    assert [(r.uid, r.share) for r in paid.rows] == [(1, pytest.approx(0.1)), (2, 0.9)]


def test_research_share_and_u16_match_bittensor_normalize(hk):
    mg = StaticMetagraph.of(hk[:4])
    settings = make_settings(winner_share=0.7, research_share=0.3)
    plan = build_plan([entry(1, hk[3], 1.0)], mg, settings, research_credit={hk[1]: 1, hk[2]: 2})
    assert [r.share for r in plan.rows] == pytest.approx([0.1, 0.2, 0.7], abs=1e-12)
    # max-upscale: 0.1/0.7 * 65535 = 9362.14 -> 9362; 0.2/0.7 * 65535 = 18724.29 -> 18724
    assert (plan.uids, plan.weights_u16) == ([1, 2, 3], [9362, 18724, 65535])
    assert normalize([1, 2, 3], [0.1, 0.2, 0.7]) == ([1, 2, 3], [9362, 18724, 65535])


def test_unassigned_share_is_burned(hk):
    mg = StaticMetagraph.of(hk[:3])
    plan = build_plan([entry(1, hk[2], 1.0)], mg, make_settings(winner_share=0.6, burn_uid=0))
    # burn 0.4 / 0.6 * 65535 = 43690
    assert (plan.uids, plan.weights_u16) == ([0, 2], [43690, 65535])
    assert plan.rows[0].hotkey is None  # no scored hotkey holds the burn uid
    assert plan.rows[0].reasons == ["burn: unassigned share 0.4"]


def test_nothing_eligible_burns_everything(hk):
    mg = StaticMetagraph.of(hk[:3])
    plan = build_plan([entry(1, hk[1], 0.5, eligible=False)], mg, make_settings(burn_uid=1))
    assert (plan.uids, plan.weights_u16) == ([1], [65535])
    assert plan.leader is None
    assert plan.rows[0].reasons == ["burn: nothing eligible"]
    empty = build_plan([], StaticMetagraph.of([], allow_any=True), make_settings(burn_uid=0))
    assert (empty.uids, empty.weights_u16) == ([0], [65535])


def test_deregistered_leader_is_excluded_and_the_lead_passes_on(hk):
    entries = [entry(1, hk[1], 2.0), entry(2, hk[2], 1.0), entry(3, hk[3], 1.5)]
    mg = StaticMetagraph.of([hk[0], hk[1], hk[3]])  # hk[2] deregistered
    plan = build_plan(entries, mg, make_settings(winner_share=1.0, research_share=0.0))
    assert plan.leader.hotkey == hk[3]
    assert (plan.uids, plan.weights_u16) == ([2], [65535])
    assert [(x.hotkey, x.reason.split(" (")[0]) for x in plan.excluded] == [
        (hk[2], "not registered on the subnet")
    ]
    # Everyone deregistered: burn.
    gone = build_plan(entries, StaticMetagraph.of([hk[0]]), make_settings(burn_uid=0))
    assert (gone.uids, gone.weights_u16) == ([0], [65535])
    assert {x.hotkey for x in gone.excluded} == {hk[1], hk[2], hk[3]}


def test_research_credit_of_a_deregistered_hotkey_goes_to_the_registered_ones(hk):
    mg = StaticMetagraph.of(hk[:3])
    settings = make_settings(winner_share=0.5, research_share=0.5)
    plan = build_plan([entry(1, hk[0], 1.0)], mg, settings,
                      research_credit={hk[1]: 1.0, hk[5]: 3.0})
    assert [(r.uid, r.share) for r in plan.rows] == [(0, 0.5), (1, 0.5)]
    assert plan.weights_u16 == [65535, 65535]
    assert [x.hotkey for x in plan.excluded] == [hk[5]]


def test_burn_uid_held_by_the_leader_merges_into_one_row(hk):
    mg = StaticMetagraph.of(hk[:2])
    plan = build_plan([entry(1, hk[0], 1.0)], mg, make_settings(winner_share=0.5, burn_uid=0))
    assert (plan.uids, plan.weights_u16) == ([0], [65535])
    assert plan.rows[0].share == 1.0 and len(plan.rows[0].reasons) == 2


def test_bad_configuration_and_credit_are_clear_errors(hk):
    mg = StaticMetagraph.of(hk[:2])
    with pytest.raises(ValueError, match="burn_uid 5"):
        build_plan([], mg, make_settings(burn_uid=5))
    settings = make_settings(winner_share=0.5, research_share=0.5)
    with pytest.raises(ValueError, match="finite"):
        build_plan([], mg, settings, research_credit={hk[0]: float("nan")})
    with pytest.raises(ValueError, match="finite"):
        build_plan([], mg, settings, research_credit={hk[0]: -1.0})
    with pytest.raises(ValueError, match="winner_share"):
        make_settings(winner_share=0.8, research_share=0.3)
    with pytest.raises(ValueError, match="exceeds 1"):
        split_payout(None, {}, winner_share=0.8, research_share=0.3)


def test_tiny_shares_that_round_to_zero_are_reported_not_sent(hk):
    mg = StaticMetagraph.of(hk[:3])
    settings = make_settings(winner_share=0.999995, research_share=0.000005)
    plan = build_plan([entry(1, hk[0], 1.0)], mg, settings, research_credit={hk[1]: 1.0})
    # 5e-6 / 0.999995 * 65535 = 0.33 rounds to 0 and bittensor drops it
    assert (plan.uids, plan.weights_u16) == ([0], [65535])
    assert plan.rows[1].u16 == 0 and plan.rows[1].reasons[-1] == "rounds to 0 in u16: not set"


@pytest.mark.parametrize("seed", range(5))
def test_u16_vector_equals_bittensor_normalize_on_random_splits(hk, seed):
    rng = random.Random(seed)
    mg = StaticMetagraph.of(hk)
    credit = {h: rng.random() for h in hk if rng.random() < 0.7}
    winner = rng.random()
    settings = make_settings(winner_share=winner, research_share=1 - winner, burn_uid=5)
    plan = build_plan([entry(1, hk[rng.randrange(6)], 1.0)], mg, settings, research_credit=credit)
    shares = [r.share for r in plan.rows]
    assert sum(shares) == pytest.approx(1.0, abs=1e-12)
    assert (plan.uids, plan.weights_u16) == normalize([r.uid for r in plan.rows], shares)
    assert max(plan.weights_u16) == 65535


def test_burn_to_the_owner_follows_the_owners_hotkey_to_its_uid(hk):
    owner_on_2 = StaticMetagraph.of(hk[:4], owner=hk[2])
    plan = build_plan([entry(1, hk[1], 1.0)], owner_on_2,
                      make_settings(winner_share=0.9, research_share=0.0, burn_uid="owner"))
    assert (plan.uids, plan.weights_u16) == ([1, 2], [65535, 7282])
    burn = plan.rows[1]
    assert (burn.uid, burn.hotkey, burn.reasons) == (2, hk[2], ["burn: unassigned share 0.1"])
    # no owner known (the local ledger): uid 0, the owner's uid on a new subnet
    unknown = build_plan([], StaticMetagraph.of(hk[:4]), make_settings(burn_uid="owner"))
    assert (unknown.uids, unknown.rows[0].hotkey) == ([0], None)


def test_an_owner_that_holds_no_uid_is_a_clear_error_naming_the_fix(hk):
    gone = StaticMetagraph.of(hk[:3], owner=hk[5])
    with pytest.raises(ValueError) as error:
        build_plan([], gone, make_settings(burn_uid="owner"))
    assert str(error.value) == (
        f"weights.burn_uid is 'owner' but the subnet owner's hotkey {hk[5]} holds no uid on "
        "netuid 1: set weights.burn_uid to the uid to burn to")
