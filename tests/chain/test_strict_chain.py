"""PRISM against what the real chain enforces, through the strict fake: precedence read at
the finalized head agrees across a reorg, a commitment is confirmed by reading it back (also
after a lost answer, and only once finalized), the commitment quota and the serving rate
limit are refusals PRISM names or avoids, and commit-reveal commits stay under the
unrevealed-commit limit."""

from __future__ import annotations

import bittensor
import pytest

from prism_challenge.chain.metagraph import LiveMetagraph
from prism_challenge.chain.online import CommitmentRefused, OnlineSubnet
from prism_challenge.chain.precedence import precedence
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.chain.subtensor import ChainUnavailable
from prism_challenge.config.settings import Settings
from prism_challenge.weights.chain import WeightSetter
from prism_challenge.weights.plan import WeightPlan


def subnet(client, **kwargs) -> OnlineSubnet:
    c = client(**{k: kwargs.pop(k) for k in ("timeout_s",) if k in kwargs})
    view = LiveMetagraph(c, refresh_blocks=1, status=None)
    view.refresh(force=True)
    return OnlineSubnet(c, view, min_read_interval_s=0.0, **kwargs)


def test_two_validators_reading_around_a_reorg_agree_on_precedence(client, fake, wallets):
    fake.finality_lag = 3
    miner, rival = wallets["miner"], wallets["rival"]
    writer = client()
    for wallet, block in ((miner, 1001), (rival, 1002)):  # on the best chain, not final
        fake.block = block
        writer.set_commitment(wallet, commitment_value(wallet.hotkey.ss58_address, "d" * 64))
    a, b = subnet(client), subnet(client)
    keys = [miner.hotkey.ss58_address, rival.hotkey.ss58_address]
    before = {hk: a.latest_commitment(hk) for hk in keys}  # validator a reads first
    fake.reorg()  # the two blocks are replaced: the rival's commitment now comes first
    fake.block = 1005  # finalized head 1002: both commitments final on the new fork
    after = {hk: b.latest_commitment(hk) for hk in keys}
    again = {hk: a.latest_commitment(hk) for hk in keys}
    # What a read before finality saw never contradicts what is final: it saw nothing.
    assert before == {keys[0]: None, keys[1]: None}
    assert {hk: (c.block, c.uid) for hk, c in after.items()} == {keys[0]: (1002, 2),
                                                                 keys[1]: (1001, 3)}
    assert again == after
    order = sorted(keys, key=lambda hk: precedence(after[hk].block, after[hk].uid))
    assert order == [keys[1], keys[0]]


def test_a_commitment_is_returned_once_finalized(client, fake, wallets):
    fake.finality_lag = 2
    waits = []

    def block_passes(seconds: float) -> None:
        waits.append(seconds)
        fake.block += 1

    s = subnet(client, poll_s=0.5, sleep=block_passes)
    miner = wallets["miner"]
    value = commitment_value(miner.hotkey.ss58_address, "e" * 64)
    made = s.commit(miner, value)
    assert (made.value, made.block, made.uid) == (value, 1000, 2)
    assert waits == [0.5, 0.5] and fake.finalized == 1000


def test_a_commitment_whose_answer_was_lost_is_read_back(client, fake, wallets):
    fake.lose = 1  # it lands, but the answer never comes back
    s = subnet(client, timeout_s=0.5, sleep=lambda _: None)
    miner = wallets["miner"]
    value = commitment_value(miner.hotkey.ss58_address, "f" * 64)
    made = s.commit(miner, value)
    assert (made.value, made.block) == (value, 1000)
    assert len(fake.sent("set_commitment")) == 1  # confirmed, not sent again


def test_a_dropped_commitment_is_reported_unavailable_with_the_next_step(client, fake, wallets):
    fake.drop = 1  # never included
    s = subnet(client, timeout_s=0.5, finality_wait_s=0.0, sleep=lambda _: None)
    miner = wallets["miner"]
    with pytest.raises(ChainUnavailable, match="not on chain: run the command again"):
        s.commit(miner, commitment_value(miner.hotkey.ss58_address, "0" * 64))
    assert fake.commitments == {}


def test_a_commitment_the_pool_usurped_is_unavailable_with_the_next_step_not_refused(
        client, fake, wallets):
    fake.reject = "Usurped"  # another extrinsic with the same nonce took its place
    s = subnet(client, finality_wait_s=0.0, sleep=lambda _: None)
    miner = wallets["miner"]
    with pytest.raises(ChainUnavailable, match="Usurped.*not on chain: run the command again"):
        s.commit(miner, commitment_value(miner.hotkey.ss58_address, "5" * 64))
    assert fake.commitments == {}


def test_the_commitment_quota_is_a_refusal_with_the_next_step(client, fake, wallets):
    fake.max_space = 250  # two commitments of 100 bytes (at least) per epoch
    s = subnet(client, sleep=lambda _: None)
    miner = wallets["miner"]
    hotkey = miner.hotkey.ss58_address
    for digest in ("1" * 64, "2" * 64):
        s.commit(miner, commitment_value(hotkey, digest))
    with pytest.raises(CommitmentRefused, match="SpaceLimitExceeded.*submit again then"):
        s.commit(miner, commitment_value(hotkey, "3" * 64))
    assert s.latest_commitment(hotkey).value == commitment_value(hotkey, "2" * 64)
    fake.block += fake.hyper["Tempo"] + 1  # the next epoch: the quota is back
    assert s.commit(miner, commitment_value(hotkey, "3" * 64)).block == fake.block


def test_an_unregistered_hotkey_commitment_is_refused_by_name(client, fake, wallets):
    fake.neurons.pop()  # the rival deregistered
    s = subnet(client, sleep=lambda _: None)
    rival = wallets["rival"]
    with pytest.raises(CommitmentRefused, match="not registered there"):
        s.commit(rival, commitment_value(rival.hotkey.ss58_address, "4" * 64))


def test_serve_axon_inside_the_serving_rate_limit_is_refused_and_prism_waits(
        client, fake, wallets):
    fake.block = 920  # the validator's axon was served at 900, the limit is 50
    validator = wallets["validator"]
    with pytest.raises(bittensor.ChainError, match="ServingRateLimitExceeded"):
        client().serve_axon(validator, "10.0.0.2", 8000)
    s = subnet(client)
    assert s.serve(validator, "10.0.0.2", 8000) == (
        "not yet: the serving rate limit allows 10.0.0.2:8000 in 30 blocks")
    assert s.serve(validator, "10.0.0.1", 8000) == "10.0.0.1:8000 already published"
    assert len(fake.sent("serve_axon")) == 1  # only the direct call above
    fake.block = 950
    assert s.serve(validator, "10.0.0.2", 8000) == "published 10.0.0.2:8000"


def test_commit_reveal_commits_stay_under_the_unrevealed_limit(client, fake, wallets):
    fake.hyper.update(CommitRevealWeightsEnabled=True, WeightsSetRateLimit=0, Tempo=100)
    validator = wallets["validator"]
    c = client()
    fake.max_unrevealed = 2
    for _ in range(2):
        c.set_weights(validator, [0], [1.0], version_key=0)
    with pytest.raises(bittensor.ChainError, match="TooManyUnrevealedCommits"):
        c.set_weights(validator, [0], [1.0], version_key=0)
    # PRISM's setter commits at most once per tempo: 30 offers over 750 blocks, 8 commits,
    # never more than one unrevealed at a time (each reveals at the next epoch).
    fake.commits.clear()
    fake.block, fake.neurons[1].last_update = 2000, 0
    view = LiveMetagraph(c, refresh_blocks=1, status=None)
    setter = WeightSetter(c, validator, Settings(chain={"mode": "online", "netuid": 7}),
                          sleep=lambda _: None)
    plan = WeightPlan(netuid=7, block=None, corpus="demo", dry_run=False, leader=None,
                      uids=[0], weights_u16=[65535], rows=[], excluded=[])
    outcomes, pending = [], []
    for _ in range(30):
        fake.block += 25
        view.refresh(force=True)
        outcomes.append(setter.offer(plan, view).outcome)
        pending.append(len(fake.pending(validator.hotkey.ss58_address)))
    assert outcomes.count("committed") == 8 and "failed" not in outcomes
    assert max(pending) == 1 and fake.dropped == []
    assert fake.weights[1] == {0: 65535}  # revealed
