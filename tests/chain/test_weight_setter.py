"""`WeightSetter`: weights go on chain only when the subnet allows it, with the version
key, commit-reveal when the subnet has it, retries with backoff, and a counted outcome."""

from __future__ import annotations

import logging

import pytest
from chain_kit import NETUID
from fake_substrate import Neuron
from prometheus_client import CollectorRegistry, generate_latest

from prism_challenge.chain.metagraph import LiveMetagraph
from prism_challenge.chain.status import ChainStatus
from prism_challenge.chain.subtensor import ChainClient, ChainUnavailable
from prism_challenge.config.settings import Settings
from prism_challenge.scoring.leaderboard import Entry
from prism_challenge.scoring.version import version_key
from prism_challenge.weights.chain import WeightSetter
from prism_challenge.weights.plan import WeightPlan, build_plan

SETTINGS = Settings(chain={"mode": "online", "netuid": 7, "retries": 3, "backoff_s": 2.0},
                    weights={"dry_run": False})
PLAN = WeightPlan(netuid=7, block=1000, corpus="demo", dry_run=False, leader=None,
                  uids=[0, 2], weights_u16=[21845, 65535], rows=[], excluded=[])


@pytest.fixture
def setup(setter_on):
    # Commit-reveal is off unless a test turns it on (the chain's default for a new subnet
    # is on): most tests here set weights directly.
    return lambda **hyper: setter_on(**{"CommitRevealWeightsEnabled": False, **hyper})


def test_weights_are_set_when_the_rate_limit_has_passed_with_the_scoring_version_key(
        setup, fake):
    view, setter, _, status = setup()
    fake.block = 1050  # last update 950, limit 100
    outcome = setter.offer(PLAN, view)
    assert (outcome.outcome, outcome.block) == ("set", 1050)
    (sent,) = fake.extrinsics
    assert sent.function == "set_mechanism_weights"
    assert sent.params["dests"] == [0, 2] and sent.params["weights"] == [21845, 65535]
    assert sent.params["version_key"] == version_key() == 1_003_000
    assert status.weights["set"] == 1 and status.last_set_block == 1050


def test_before_the_rate_limit_nothing_is_sent_not_even_after_our_own_set(setup, fake):
    view, setter, _, status = setup()
    fake.block = 1049
    assert setter.offer(PLAN, view).outcome == "not_yet"
    assert fake.extrinsics == []
    fake.block = 1050
    assert setter.offer(PLAN, view).outcome == "set"
    fake.block = 1100  # the metagraph still says 950 (not refreshed); we remember 1050
    outcome = setter.offer(PLAN, view)
    assert outcome.outcome == "not_yet" and "last set 50 blocks ago" in outcome.message
    assert len(fake.extrinsics) == 1
    assert status.weights == {"not_yet": 2, "set": 1}


def test_the_chains_own_rate_limit_refusal_is_not_yet_not_a_failure(setup, fake):
    view, setter, _, _ = setup()
    fake.neurons[1].last_update = 1040  # set by another process; our view says 950
    fake.block = 1060
    outcome = setter.offer(PLAN, view)
    assert outcome.outcome == "not_yet" and "rate limit is 100 blocks" in outcome.message
    assert fake.extrinsics == []


def test_a_commit_reveal_subnet_gets_a_commit(setup, fake):
    view, setter, _, status = setup(CommitRevealWeightsEnabled=True)
    fake.block = 1100
    assert setter.offer(PLAN, view).outcome == "committed"
    assert fake.extrinsics[0].function == "commit_timelocked_mechanism_weights"
    assert status.last_set_block == 1100


def test_an_empty_vector_is_never_sent(setup, fake):
    view, setter, _, _ = setup()
    fake.block = 1100
    outcome = setter.offer(PLAN.model_copy(update={"uids": [], "weights_u16": []}), view)
    assert outcome.outcome == "refused" and "no non-zero weight" in outcome.message
    assert fake.extrinsics == []


def test_a_stale_metagraph_makes_weights_wait(setup, fake):
    view, setter, _, status = setup()
    fake.down = True
    view.refresh()
    fake.down, fake.block = False, 1100
    assert setter.offer(PLAN, view).outcome == "stale"
    assert fake.extrinsics == [] and status.weights == {"stale": 1}


def test_a_version_key_below_the_subnets_minimum_is_refused_with_the_fix(setup, fake):
    view, setter, _, _ = setup(WeightsVersionKey=2_000_000)
    fake.block = 1100
    outcome = setter.offer(PLAN, view)
    assert outcome.outcome == "refused" and "requires version key >= 2000000" in outcome.message
    assert fake.extrinsics == []


def test_an_unreachable_chain_is_retried_with_doubling_backoff_then_fails(setup, fake):
    view, setter, sleeps, status = setup()
    fake.block, fake.down = 1100, True
    outcome = setter.offer(PLAN, view)
    assert outcome.outcome == "failed" and "after 4 attempts" in outcome.message
    assert sleeps == [2.0, 4.0, 8.0]
    assert status.weights == {"failed": 1}


def test_a_chain_back_during_the_retries_gets_the_weights(setup, fake):
    view, setter, sleeps, _ = setup()
    fake.block, fake.down = 1100, True
    setter.sleep = lambda s: (sleeps.append(s), setattr(fake, "down", False))
    assert setter.offer(PLAN, view).outcome == "set"
    assert sleeps == [2.0] and len(fake.extrinsics) == 1


def test_a_refusal_by_the_chain_is_not_retried(setup, fake):
    view, setter, sleeps, _ = setup()
    fake.block, fake.reject = 1100, "IncorrectWeightVersionKey"
    outcome = setter.offer(PLAN, view)
    assert outcome.outcome == "failed" and "IncorrectWeightVersionKey" in outcome.message
    assert sleeps == [] and len(fake.extrinsics) == 1


@pytest.mark.parametrize("fate", ["Dropped", "Invalid", "Usurped", "Retracted",
                                  "FinalityTimeout", "Future"])
def test_what_the_pool_did_with_the_write_is_retried_not_a_refusal(setup, fake, fate):
    view, setter, sleeps, status = setup()
    fake.block, fake.reject = 1100, fate  # the library names the pool's fate like an error
    outcome = setter.offer(PLAN, view)
    assert (outcome.outcome, outcome.block) == ("set", 1100), outcome.message
    assert sleeps == [2.0] and len(fake.sent("set_mechanism_weights")) == 2
    assert fake.weights[1] == {0: 21845, 2: 65535} and status.weights == {"set": 1}


def test_outcomes_are_exported_as_prometheus_metrics(setup, fake):
    view, setter, _, status = setup()
    fake.block = 1050
    setter.offer(PLAN, view)
    setter.offer(PLAN, view)
    registry = CollectorRegistry()
    registry.register(status)
    text = generate_latest(registry).decode()
    assert 'prism_weights_attempts_total{outcome="set"} 1.0' in text
    assert 'prism_weights_attempts_total{outcome="not_yet"} 1.0' in text
    assert "prism_weights_last_set_block 1050.0" in text
    view.refresh(force=True)
    text = generate_latest(registry).decode()
    assert "prism_chain_metagraph_stale 0.0" in text
    assert "prism_chain_metagraph_block 1050.0" in text


LEADER_AND_BURN = WeightPlan(netuid=7, block=1000, corpus="demo", dry_run=False, leader=None,
                             uids=[0, 2], weights_u16=[7282, 65535], rows=[], excluded=[])


def test_a_capped_subnet_stores_the_clipped_vector_and_the_log_shows_that_vector(setup, fake):
    view, setter, _, _ = setup(MaxWeightsLimit=32768)  # no uid above about half
    fake.block = 1050
    outcome = setter.offer(LEADER_AND_BURN, view)  # 10% burn, 90% leader
    assert outcome.outcome == "set", outcome.message
    stored = fake.weights[1]
    # About 50/50, as the chain keeps it: 65535 * 65535 <= 32768 * (65534 + 65535), the
    # chain's test (the library's own 65533 fails it by one).
    assert stored == {0: 65534, 2: 65535}
    assert setter.last_sent.uids == [0, 2]
    assert setter.last_sent.weights_u16 == [65534, 65535]
    assert outcome.message.endswith(": 0=65534, 2=65535")
    assert "clipped to the subnet's max_weight_limit 32768/65535" in outcome.message


def test_a_cap_the_librarys_rounding_overshoots_is_met_exactly_on_chain(setup, fake):
    view, setter, _, _ = setup(MaxWeightsLimit=32769)
    fake.block = 1050
    outcome = setter.offer(LEADER_AND_BURN, view)
    # The library alone sends 0=65529, 2=65535: 65535 * 65535 > 32769 * 131064, refused.
    assert outcome.outcome == "set", outcome.message
    assert fake.weights[1] == {0: 65530, 2: 65535}
    assert 65535 * 65535 <= 32769 * (65530 + 65535)


def test_two_uids_under_half_a_cap_are_refused_not_sent(setup, fake):
    view, setter, _, status = setup(MaxWeightsLimit=30000)  # even 50/50 exceeds the cap
    fake.block = 1050
    outcome = setter.offer(LEADER_AND_BURN, view)
    assert outcome.outcome == "refused"
    assert "needs at least 3 non-zero weights; this plan pays 2 uid(s)" in outcome.message
    assert fake.extrinsics == [] and status.weights == {"refused": 1}


def test_min_allowed_weights_above_the_plan_is_refused_with_its_reason(setup, fake):
    view, setter, _, status = setup(MinAllowedWeights=8)
    fake.block = 1050
    outcome = setter.offer(PLAN, view)
    assert outcome.outcome == "refused"
    assert "requires at least 8 non-zero weights (min_allowed_weights)" in outcome.message
    assert "pays 2 uid(s)" in outcome.message
    assert fake.extrinsics == [] and status.weights == {"refused": 1}


def test_commit_reveal_with_rate_limit_zero_still_waits_a_tempo(setup, fake):
    view, setter, _, _ = setup(CommitRevealWeightsEnabled=True, WeightsSetRateLimit=0,
                               Tempo=360)
    fake.block = 1310  # one tempo after the last update at 950
    assert setter.offer(PLAN, view).outcome == "committed"
    fake.block = 1315  # a later epoch, same tempo: no second unrevealed commit
    late = setter.offer(PLAN, view)
    assert late.outcome == "not_yet" and "once per 360 blocks" in late.message
    assert [s.function for s in fake.extrinsics] == ["commit_timelocked_mechanism_weights"]
    assert all(s.function != "commit_crv3_mechanism_weights" for s in fake.extrinsics)


def test_prism_weights_shows_what_a_capped_subnet_stores(client, fake):
    from prism_challenge.weights.conform import conform_online

    fake.hyper["MaxWeightsLimit"] = 32768
    shown = conform_online(LEADER_AND_BURN, client(), self_uid=1)
    assert (shown.uids, shown.weights_u16) == ([0, 2], [65534, 65535])
    assert shown.as_sent.startswith("clipped to the subnet's max_weight_limit 32768/65535")
    fake.down = True
    unread = conform_online(LEADER_AND_BURN, client(), self_uid=1)
    assert unread.weights_u16 == [7282, 65535]
    assert unread.as_sent.startswith("not conformed: the subnet's weight rules could not")


def test_a_set_whose_answer_is_lost_is_confirmed_by_last_update_not_repeated(
        client, fake, wallets):
    fake.hyper.update(Tempo=100, CommitRevealWeightsEnabled=False)  # a plain set
    status = ChainStatus()
    view = LiveMetagraph(client(timeout_s=0.3), refresh_blocks=1000, status=status)
    view.refresh()
    setter = WeightSetter(view._client, wallets["validator"], SETTINGS, status=status,
                          sleep=lambda s: None)
    fake.block, fake.lose = 1050, 1  # lands at 1050; the answer never comes back
    outcome = setter.offer(PLAN, view)
    assert (outcome.outcome, outcome.block) == ("set", 1050)
    assert "confirmed by LastUpdate" in outcome.message
    assert len(fake.sent("set_mechanism_weights")) == 1
    assert fake.weights[1] == {0: 21845, 2: 65535}


def test_a_retry_names_the_failed_call_once_not_under_a_doubled_prefix(setup, fake, caplog):
    view, setter, sleeps, _ = setup()
    fake.block, fake.reject = 1100, "Dropped"  # the pool dropped the write: retried
    with caplog.at_level(logging.WARNING, logger="prism.weights"):
        assert setter.offer(PLAN, view).outcome == "set"
    retries = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert retries == ["weights: attempt 1 of 4: SetWeights: local failed: Dropped; "
                       "retrying in 2.0 s"]


def _leader(hotkey: str) -> Entry:
    return Entry(submission_id=1, hotkey=hotkey, digest="0" * 64, accepted_at=1.0, bpb=1.0,
                 heldout_delta=1.0, eligible=True, corpus="demo", scored_at=1.0, reason=None,
                 verification="passed")


def test_where_the_owner_holds_uid_0_as_on_a_new_subnet_owner_burns_like_0(setup, fake, wallets):
    # The chain registers the owner's hotkey on uid 0 with the subnet and never replaces it.
    view, setter, _, _ = setup()
    owner = Settings(chain={"netuid": 7}, weights={"burn_uid": "owner", "dry_run": False})
    plan = build_plan([_leader(wallets["miner"].hotkey.ss58_address)], view, owner)
    assert plan.uids == _plan_paying_the_miner(view, wallets).uids == [0, 2]
    assert plan.rows[0].hotkey == fake.owner_hotkey == fake.neurons[0].hotkey
    fake.block = 1100
    assert setter.offer(plan, view).outcome == "set" and fake.weights[1][0] > 0


def test_the_burn_goes_to_the_owners_uid_when_the_owner_is_not_on_uid_0(setup, fake, wallets):
    """uid 0 is a miner here; the subnet owner's hotkey holds uid 3."""
    view, setter, _, _ = setup()
    fake.owner_hotkey = wallets["rival"].hotkey.ss58_address
    view.refresh(force=True)
    settings = Settings(chain={"netuid": 7}, weights={"burn_uid": "owner", "winner_share": 0.9,
                                                      "research_share": 0.0})
    miner = wallets["miner"].hotkey.ss58_address
    plan = build_plan([_leader(miner)], view, settings)
    assert [(r.uid, r.hotkey, r.u16) for r in plan.rows] == [
        (2, miner, 65535), (3, fake.owner_hotkey, 7282)]
    fake.block = 1100
    assert setter.offer(plan, view).outcome == "set"
    assert fake.weights[1] == {2: 65535, 3: 7282}
    # the owner's hotkey deregistered and its uid taken after the plan: nothing is sent
    fake.neurons[3] = Neuron("5newcomer")
    fake.block = 1200
    outcome = setter.offer(plan, view)
    assert outcome.outcome == "stale" and "uid 3 planned for" in outcome.message
    assert fake.weights[1] == {2: 65535, 3: 7282}


def _plan_paying_the_miner(view, wallets) -> WeightPlan:
    return build_plan([_leader(wallets["miner"].hotkey.ss58_address)], view, SETTINGS)


def _keep_active_at(block, fake, view, setter, caplog):
    """The epoch at `block`, without a quorum: (keep_active's outcome, what it logged)."""
    fake.block = block
    view.refresh(force=True)
    with caplog.at_level(logging.INFO, logger="prism.weights"):
        outcome = setter.keep_active(view)
    return outcome, [r.getMessage() for r in caplog.records]


def test_without_a_quorum_the_last_weights_are_sent_again_before_the_activity_cutoff(
        setup, fake, wallets, caplog):
    # tempo 100 x 5.000: the chain counts a validator inactive 500 blocks after LastUpdate
    view, setter, _, _ = setup(ActivityCutoffFactorMilli=5000)
    assert view._client.activity_cutoff() == fake.activity_cutoff() == 500
    fake.block = 1050
    assert setter.offer(_plan_paying_the_miner(view, wallets), view).outcome == "set"
    stored = dict(fake.weights[1])
    fake.block = 1300  # half the cutoff since LastUpdate 1050: not yet
    view.refresh(force=True)
    assert setter.keep_active(view) is None and len(fake.extrinsics) == 1
    outcome, said = _keep_active_at(1301, fake, view, setter, caplog)
    assert (outcome.outcome, outcome.block) == ("set", 1301)
    assert said[0] == (
        "weights: no quorum; re-sending the weights last set (block 1050): 251 blocks have "
        "passed of the 500 after which the chain counts this validator inactive (no dividends)")
    assert fake.weights[1] == stored and fake.neurons[1].last_update == 1301
    fake.block = 1700  # the epoch at 1608 counts a LastUpdate of 1050 inactive, 1301 not
    view.refresh(force=True)
    assert view.neuron(wallets["validator"].hotkey.ss58_address).active
    assert fake.active(1608) == [False, True, False, False]


def test_on_a_runtime_without_the_cutoff_factor_the_absolute_activity_cutoff_is_read(
        setup, fake, wallets):
    # A runtime from before ActivityCutoffFactorMilli: the item is not in its metadata (the
    # read fails before any request), and its epoch reads ActivityCutoff, in blocks.
    view, setter, _, _ = setup()
    fake.absent.add("ActivityCutoffFactorMilli")
    fake.hyper["ActivityCutoff"] = 300
    assert view._client.activity_cutoff() == fake.activity_cutoff() == 300
    fake.block = 1050
    assert setter.offer(_plan_paying_the_miner(view, wallets), view).outcome == "set"
    fake.block = 1200  # half the cutoff since LastUpdate 1050: not yet
    view.refresh(force=True)
    assert setter.keep_active(view) is None and len(fake.extrinsics) == 1
    fake.block = 1201
    view.refresh(force=True)
    outcome = setter.keep_active(view)
    assert (outcome.outcome, outcome.block) == ("set", 1201)
    fake.absent.add("ActivityCutoff")  # neither item: unavailable, not a crash of the epoch
    with pytest.raises(ChainUnavailable, match="neither ActivityCutoffFactorMilli nor"):
        view._client.activity_cutoff()
    assert setter.keep_active(view) is None


def test_a_resend_never_pays_a_uid_that_changed_hands(setup, fake, wallets):
    view, setter, _, _ = setup(ActivityCutoffFactorMilli=5000)
    fake.block = 1050
    assert setter.offer(_plan_paying_the_miner(view, wallets), view).outcome == "set"
    fake.neurons[2] = Neuron("5newcomer")  # the miner's uid 2 went to a newcomer
    fake.block = 1400
    view.refresh(force=True)
    outcome = setter.keep_active(view)
    assert outcome.outcome == "stale" and "uid 2 planned for" in outcome.message
    assert len(fake.extrinsics) == 1 and fake.neurons[1].last_update == 1050


def _restarted(view, wallets) -> WeightSetter:
    """The validator's setter after a restart: nothing it sent before is in memory."""
    return WeightSetter(view._client, wallets["validator"], SETTINGS, status=ChainStatus(),
                        sleep=lambda _: None)


def test_a_restarted_node_resends_the_weights_the_chain_holds_for_its_uid(
        setup, fake, wallets, caplog):
    view, setter, _, _ = setup(ActivityCutoffFactorMilli=5000)
    fake.block = 1050
    assert setter.offer(_plan_paying_the_miner(view, wallets), view).outcome == "set"
    stored = dict(fake.weights[1])
    setter = _restarted(view, wallets)
    # past half the cutoff since LastUpdate 1050, no quorum
    outcome, said = _keep_active_at(1301, fake, view, setter, caplog)
    assert (outcome.outcome, outcome.block) == ("set", 1301)
    assert said[0] == (
        "weights: no quorum; re-sending the weights the chain holds for uid 1 (block 1050): "
        "251 blocks have passed of the 500 after which the chain counts this validator "
        "inactive (no dividends)")
    resent = fake.extrinsics[-1].params
    assert dict(zip(resent["dests"], resent["weights"], strict=True)) == stored
    assert fake.weights[1] == stored and fake.neurons[1].last_update == 1301
    assert setter.last_sent is not None and setter.last_sent.uids == sorted(stored)


def test_a_restarted_nodes_resend_leaves_out_the_weight_the_chain_zeroed(
        setup, fake, wallets):
    # The miner's uid 2 went to a newcomer after the weights were set: the chain zeroed the
    # weight on it (clear_neuron), so what it holds pays the burn only, and that is re-sent.
    view, setter, _, _ = setup(ActivityCutoffFactorMilli=5000)
    fake.block = 1050
    assert setter.offer(_plan_paying_the_miner(view, wallets), view).outcome == "set"
    fake.replace(2, "5newcomer")
    assert fake.weights[1][2] == 0
    setter = _restarted(view, wallets)
    fake.block = 1400
    view.refresh(force=True)
    assert setter.keep_active(view).outcome == "set"
    assert fake.extrinsics[-1].params["dests"] == [0] and fake.weights[1] == {0: 65535}


def test_the_weights_read_is_keyed_as_the_chain_keys_it(client, fake):
    fake.weights[1] = {0: 100, 2: 65535}
    c = client()
    assert c.weights_of(1) == {0: 100, 2: 65535}
    assert c.weights_of(3) == {}  # no row: the empty default
    other = ChainClient("local", NETUID + 1, substrate=fake)
    try:
        assert other.weights_of(1) == {} and other.last_update(1) == 0
    finally:
        other.close()


def test_no_resend_without_weights_sent_since_start_but_one_warning(setup, fake, caplog):
    view, setter, _, _ = setup(ActivityCutoffFactorMilli=5000)
    fake.block = 1300  # LastUpdate 950 (before this node started): past half the cutoff
    view.refresh(force=True)
    with caplog.at_level(logging.WARNING, logger="prism.weights"):
        assert setter.keep_active(view) is None and setter.keep_active(view) is None
    assert [r.getMessage() for r in caplog.records] == [
        f"weights: no quorum, this node has sent no weights since it started and the chain "
        f"holds none for uid 1: the chain counts {fake.neurons[1].hotkey} inactive (no "
        "dividends) at block 1451 unless weights are set (prism weights --set)"]
    assert fake.extrinsics == []
