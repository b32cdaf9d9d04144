"""The live metagraph (block schedule, last good view, stale) and the online `Subnet`
(commitments, discovery, serving rate limit), over the real bittensor client."""

from __future__ import annotations

import pytest
from fake_substrate import Neuron, axon_of

from prism_challenge.chain.metagraph import LiveMetagraph
from prism_challenge.chain.online import OnlineSubnet
from prism_challenge.chain.status import ChainStatus
from prism_challenge.chain.subnet import Endpoint, commitment_value
from prism_challenge.chain.subtensor import ChainUnavailable


def test_the_metagraph_is_reread_only_when_refresh_blocks_have_passed(client, fake):
    status = ChainStatus()
    view = LiveMetagraph(client(), refresh_blocks=5, status=status)
    with pytest.raises(ChainUnavailable, match="no metagraph"):
        view.is_registered("anyone")  # nothing read yet: never guess
    assert view.uid_of("anyone") is None and view.stale
    assert view.refresh() is True
    assert (view.n, view.block, view.stale) == (4, 1000, False)
    fake.neurons.append(Neuron("5newcomer"))
    fake.block = 1004
    view.refresh()
    assert view.n == 4 and view.block == 1000  # 4 blocks: not due
    fake.block = 1005
    view.refresh()
    assert view.n == 5 and view.uid_of("5newcomer") == 4 and view.block == 1005
    assert (status.block, status.stale) == (1005, False)


def test_an_unreachable_chain_keeps_the_last_good_view_marked_stale(client, fake, wallets):
    status = ChainStatus()
    view = LiveMetagraph(client(), refresh_blocks=1, status=status)
    view.refresh()
    fake.down = True
    assert view.refresh() is False
    assert view.stale is True and status.stale is True
    assert view.is_registered(wallets["miner"].hotkey.ss58_address)  # intake still works
    assert view.block == 1000
    fake.down = False
    fake.block = 1001
    assert view.refresh() is True and view.stale is False and view.block == 1001


def test_commitments_are_read_once_per_interval_and_only_plain_ones_count(client, fake, wallets):
    now = [0.0]
    view = LiveMetagraph(client())
    view.refresh()
    subnet = OnlineSubnet(view._client, view, min_read_interval_s=2.0, clock=lambda: now[0])
    miner = wallets["miner"].hotkey.ss58_address
    assert subnet.latest_commitment(miner) is None
    fake.commitments[miner] = {"deposit": 0, "block": 990,
                               "info": {"fields": [{"Raw5": "0x" + b"hello".hex()}]}}
    reads = fake.reads.count(("Commitments", "CommitmentOf"))
    assert subnet.latest_commitment(miner) is None  # within the interval: the cached read
    assert fake.reads.count(("Commitments", "CommitmentOf")) == reads
    now[0] = 2.0
    seen = subnet.latest_commitment(miner)
    assert (seen.value, seen.block, seen.uid) == ("hello", 990, 2)
    sealed = {"TimelockEncrypted": {"encrypted": "0x00", "reveal_round": 10**12}}
    fake.commitments[miner]["info"]["fields"] = [sealed]
    now[0] = 4.0
    assert subnet.latest_commitment(miner) is None  # a sealed commitment names nothing yet
    fake.down = True
    now[0] = 6.0
    assert subnet.latest_commitment(miner) is None  # chain down: the last read stands


def test_commit_writes_then_reads_back_the_block(client, fake, wallets):
    view = LiveMetagraph(client())
    view.refresh()
    subnet = OnlineSubnet(view._client, view)
    value = commitment_value(wallets["miner"].hotkey.ss58_address, "d" * 64)
    made = subnet.commit(wallets["miner"], value)
    assert (made.value, made.block, made.uid) == (value, 1000, 2)
    assert len(value.encode()) == 71


def test_discovery_lists_validators_with_a_permit_and_an_address(client, fake, wallets):
    fake.neurons.append(Neuron("5permit-but-no-axon", permit=True))
    fake.neurons.append(Neuron("5axon-but-no-permit", axon=axon_of("10.0.0.9:8000")))
    view = LiveMetagraph(client())
    view.refresh()
    assert OnlineSubnet(view._client, view).validators() == [
        Endpoint(wallets["validator"].hotkey.ss58_address, "http://10.0.0.1:8000")]


def test_the_address_is_served_only_when_changed_and_when_the_rate_limit_allows(
        client, fake, wallets):
    fake.neurons.pop()  # the rival is not registered here
    view = LiveMetagraph(client(), refresh_blocks=1)
    view.refresh()
    subnet = OnlineSubnet(view._client, view)
    validator = wallets["validator"]
    assert subnet.serve(validator, "10.0.0.1", 8000) == "10.0.0.1:8000 already published"
    fake.block = 940  # served at 900, ServingRateLimit 50
    assert "in 10 blocks" in subnet.serve(validator, "203.0.113.7", 8000)
    assert fake.sent("serve_axon") == []
    fake.block = 950
    assert subnet.serve(validator, "203.0.113.7", 8000) == "published 203.0.113.7:8000"
    assert subnet.serve(validator, "203.0.113.7", 8000) == "203.0.113.7:8000 already published"
    assert len(fake.sent("serve_axon")) == 1
    assert "is not registered on netuid 7" in subnet.serve(wallets["rival"], "10.0.0.2", 1)
    assert len(fake.sent("serve_axon")) == 1


def test_an_address_the_chain_refuses_as_an_axon_is_sent_once_not_every_poll(
        client, fake, wallets):
    view = LiveMetagraph(client(), refresh_blocks=1)
    view.refresh()
    subnet = OnlineSubnet(view._client, view)
    fake.block = 950  # past the serving rate limit
    said = [subnet.serve(wallets["validator"], "255.255.255.255", 8000) for _ in range(3)]
    assert said == ["not published: netuid 7 refuses 255.255.255.255:8000 (InvalidIpAddress); "
                    "set chain.serve_address to this host's public ip:port and restart"] * 3
    assert len(fake.sent("serve_axon")) == 1 and fake.neurons[1].axon["ip"] == 167772161
    assert subnet.serve(wallets["validator"], "203.0.113.7", 8000) == "published 203.0.113.7:8000"
