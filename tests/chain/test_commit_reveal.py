"""Commit-reveal, on by default on a new subnet: the chain checks a timelocked commit only for
its rate limit and registration, and checks the weights inside at the reveal, where a
failure is dropped without a word. So PRISM refuses, before committing, what the reveal
would drop (no validator permit, too little stake, a uid not on the subnet), names the
chain's reason, and after the reveal checks that the chain holds what was committed. A plan
row whose uid changed hands since the plan is not paid either. The
fake chain has commit-reveal on by default, as the chain has; `setter_on` sets tempo 100."""

from __future__ import annotations

import logging

import pytest
from fake_substrate import Neuron

from prism_challenge.config.settings import Settings
from prism_challenge.scoring.leaderboard import Entry
from prism_challenge.weights.plan import WeightPlan, build_plan

PLAN = WeightPlan(netuid=7, block=1000, corpus="demo", dry_run=False, leader=None,
                  uids=[0, 2], weights_u16=[21845, 65535], rows=[], excluded=[])


def test_a_validator_without_a_permit_commits_nothing_and_is_told_what_to_do(setter_on, fake):
    fake.neurons[1].permit = False
    view, setter, _, status = setter_on()
    fake.block = 1100
    outcome = setter.offer(PLAN, view)
    assert outcome.outcome == "refused"
    assert "has no validator permit on netuid 7" in outcome.message
    assert "NeuronNoValidatorPermit" in outcome.message
    assert "stake more to this hotkey, or wait for the permit" in outcome.message
    assert fake.extrinsics == [] and status.weights == {"refused": 1}


def test_the_subnet_owner_commits_without_a_permit_and_its_reveal_is_applied(
        setter_on, fake, wallets):
    fake.neurons[1].permit = False
    fake.owner_hotkey = wallets["validator"].hotkey.ss58_address  # the chain exempts it
    view, setter, _, _ = setter_on()
    fake.block = 1100
    assert setter.offer(PLAN, view).outcome == "committed"
    assert fake.weights == {}  # not before the reveal
    fake.block = 1103  # the first block of the next epoch
    assert fake.weights == {1: {0: 21845, 2: 65535}} and fake.dropped == []


def test_the_fake_chain_takes_a_commit_without_a_permit_and_drops_it_at_the_reveal(
        client, fake, wallets):
    """What an operator without a permit got before: 'committed', and nothing on chain."""
    fake.neurons[1].permit = False
    fake.hyper["Tempo"] = 100
    fake.block = 1100
    client().set_weights(wallets["validator"], [0, 2], [0.25, 0.75], version_key=0)
    (sent,) = fake.extrinsics
    assert sent.function == "commit_timelocked_mechanism_weights"
    assert fake.neurons[1].last_update == 1100  # the commit sets LastUpdate
    fake.block = 1200
    assert fake.weights == {}
    assert fake.dropped == [(wallets["validator"].hotkey.ss58_address, 1103,
                             "NeuronNoValidatorPermit")]


def test_a_plain_set_on_a_commit_reveal_subnet_is_refused(fake, wallets):
    fake.block = 1100  # commit-reveal on: the fake's default
    me = wallets["validator"].hotkey.ss58_address
    assert fake._refusal(_plain_set(me)) == "CommitRevealEnabled"


def _plain_set(signer: str, dests=(0, 2), weights=(21845, 65535)):
    from fake_substrate import Sent

    return Sent("SubtensorModule", "set_mechanism_weights",
                {"netuid": 7, "mecid": 0, "dests": list(dests), "weights": list(weights),
                 "version_key": 0}, signer, 16, 1100)


@pytest.mark.parametrize(("dests", "weights", "error"), [
    ([0, 0], [1, 65535], "DuplicateUids"),
    ([0, 9], [1, 65535], "UidVecContainInvalidOne"),
    ([0, 1, 2, 3, 0], [1, 1, 1, 1, 65535], "UidsLengthExceedUidsInSubNet"),
    ([0, 2, 3], [1, 1, 65535], "WeightVecLengthIsLow"),  # min(4 uids, 8) = 4
    ([0, 1, 2, 3], [1, 1, 1, 65535], None),
    ([1], [65535], None),  # a lone self-weight is exempt from the length rule
])
def test_the_fake_chain_checks_the_uids_like_the_pallet(fake, wallets, dests, weights, error):
    fake.hyper.update(CommitRevealWeightsEnabled=False, MinAllowedWeights=8)
    fake.block = 1100
    sent = _plain_set(wallets["validator"].hotkey.ss58_address, dests, weights)
    assert fake._refusal(sent) == error


def test_without_a_permit_only_a_lone_self_weight_or_the_owner_passes(fake, wallets):
    fake.hyper["CommitRevealWeightsEnabled"] = False
    fake.neurons[1].permit, fake.block = False, 1100
    me = wallets["validator"].hotkey.ss58_address
    assert fake._refusal(_plain_set(me)) == "NeuronNoValidatorPermit"
    assert fake._refusal(_plain_set(me, [1], [65535])) is None
    fake.owner_hotkey = me
    assert fake._refusal(_plain_set(me)) is None


def test_too_little_stake_is_refused_before_committing(setter_on, fake):
    fake.hyper["StakeThreshold"] = 2 * 10**12  # the validator holds 10**12
    view, setter, _, _ = setter_on()
    fake.block = 1100
    outcome = setter.offer(PLAN, view)
    assert outcome.outcome == "refused"
    assert "holds 1000 of stake but netuid 7 requires 2000" in outcome.message
    assert "NotEnoughStakeToSetWeights" in outcome.message and fake.extrinsics == []


def test_a_uid_not_on_the_subnet_is_refused_before_committing(setter_on, fake):
    view, setter, _, _ = setter_on()
    fake.block = 1100
    outcome = setter.offer(PLAN.model_copy(update={"uids": [2, 9]}), view)  # 4 uids: 0..3
    assert outcome.outcome == "refused"
    assert "uid(s) [9] are not on netuid 7" in outcome.message
    assert "UidVecContainInvalidOne" in outcome.message and fake.extrinsics == []


def test_a_permit_read_fresh_before_sending_not_from_the_last_view(setter_on, fake):
    view, setter, _, _ = setter_on()  # the view says: permit
    fake.neurons[1].permit = False  # lost since
    fake.block = 1100
    outcome = setter.offer(PLAN, view)
    assert outcome.outcome == "refused" and "no validator permit" in outcome.message
    assert fake.extrinsics == []


def test_a_commit_dropped_at_its_reveal_is_reported_once(setter_on, fake, caplog):
    view, setter, _, status = setter_on()
    fake.block = 1100
    assert setter.offer(PLAN, view).outcome == "committed"
    fake.neurons[1].permit = False  # lost before the reveal: the chain drops the commit
    fake.block = 1310  # past the reveal epoch (1103..1203)
    assert fake.dropped[0][2] == "NeuronNoValidatorPermit" and fake.weights == {}
    view.refresh(force=True)
    with caplog.at_level(logging.WARNING, logger="prism.weights"):
        setter.offer(PLAN, view)
        setter.offer(PLAN, view)
    dropped = [r.getMessage() for r in caplog.records if "not applied" in r.getMessage()]
    assert dropped == [
        "weights: dropped: the weights committed at block 1100 were not applied at their "
        "reveal (the chain holds no weights for uid 1, not 0=21845, 2=65535): the chain "
        "drops a revealed commit that fails a weight check; check this hotkey's validator "
        "permit and stake (btcli subnets metagraph)"]
    assert status.dropped == 1


def test_an_applied_reveal_is_not_reported(setter_on, fake, caplog):
    view, setter, _, status = setter_on()
    fake.block = 1100
    assert setter.offer(PLAN, view).outcome == "committed"
    fake.block = 1310
    view.refresh(force=True)
    with caplog.at_level(logging.WARNING, logger="prism.weights"):
        assert setter.offer(PLAN, view).outcome == "committed"  # the next tempo's commit
    assert fake.weights[1] == {0: 21845, 2: 65535}
    assert not [r for r in caplog.records if "not applied" in r.getMessage()]
    assert status.dropped == 0 and setter._commits[0].block == 1310


def test_a_weight_the_chain_zeroed_when_its_uid_was_replaced_still_counts_as_applied(
        setter_on, fake, caplog):
    view, setter, _, status = setter_on()
    fake.block = 1100
    assert setter.offer(PLAN, view).outcome == "committed"
    fake.block = 1103  # revealed; then uid 2 is given to a newcomer, and the chain sets
    fake.weights[1][2] = 0  # every weight on uid 2 to 0 (clear_neuron)
    fake.block = 1310
    view.refresh(force=True)
    with caplog.at_level(logging.WARNING, logger="prism.weights"):
        setter.offer(PLAN, view)
    assert not [r for r in caplog.records if "not applied" in r.getMessage()]
    assert status.dropped == 0


def test_the_fake_reveals_each_commit_in_its_own_reveal_epoch(client, fake, wallets):
    fake.hyper.update(Tempo=100, WeightsSetRateLimit=0)
    fake.neurons.append(Neuron("5Fextra", permit=True))
    c, me = client(), wallets["validator"]
    fake.block = 1100  # epoch 10: revealed at 1103
    c.set_weights(me, [0, 2], [0.25, 0.75], version_key=0)
    fake.block = 1150  # epoch 11: revealed at 1204
    c.set_weights(me, [0, 3], [0.5, 0.5], version_key=0)
    fake.block = 1110
    assert fake.weights == {1: {0: 21845, 2: 65535}}
    assert [x.reveal_at for x in fake.pending(me.hotkey.ss58_address)] == [1204]
    fake.block = 1204
    assert fake.weights == {1: {0: 65535, 3: 65535}}
    assert fake.pending(me.hotkey.ss58_address) == []


def _scored(sid: int, hotkey: str, bpb: float) -> Entry:
    return Entry(submission_id=sid, hotkey=hotkey, digest=f"{sid:064x}", accepted_at=float(sid),
                 bpb=bpb, heldout_delta=1.0, eligible=True, corpus="demo",
                 scored_at=float(sid), verification="passed")


def test_a_uid_taken_by_a_stranger_after_the_plan_is_not_paid_and_the_next_plan_is_right(
        setter_on, fake, wallets):
    settings = Settings(chain={"netuid": 7}, weights={"winner_share": 0.9, "research_share": 0.0,
                                                      "burn_uid": 0})
    miner, rival = wallets["miner"].hotkey.ss58_address, wallets["rival"].hotkey.ss58_address
    entries = [_scored(1, miner, 1.0), _scored(2, rival, 1.5)]
    view, setter, _, _ = setter_on()
    plan = build_plan(entries, view, settings)
    assert [(r.uid, r.hotkey) for r in plan.rows] == [(0, None), (2, miner)]
    # The miner is deregistered and a stranger registers on its uid before the weights go.
    fake.neurons[2] = Neuron("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY")
    fake.block = 1100
    outcome = setter.offer(plan, view)
    assert outcome.outcome == "stale" and fake.extrinsics == []
    assert outcome.message == (
        f"uid 2 planned for {miner} is now held by "
        "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY: nothing sent, the next epoch plans "
        "on the fresh metagraph")
    replanned = build_plan(entries, view, settings)  # the view was read again before sending
    assert [(r.uid, r.hotkey) for r in replanned.rows] == [(0, None), (3, rival)]
    assert setter.offer(replanned, view).outcome == "committed"
    fake.block = 1103
    assert fake.weights == {1: {0: 7282, 3: 65535}}  # the rival leads; uid 2 gets nothing
