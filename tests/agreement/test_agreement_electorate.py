"""Who the peer loop asks and how much each counts: the permitted validators of the live
metagraph (stake from the chain, address from the served axon), or the local ledger's."""

from __future__ import annotations

# The fake chain's fixtures; its `wallets` (validator, miner, rival) stand in for this folder's.
from chain_kit import _symbol_cache, chain_client, chain_wallets, fake_chain  # noqa: F401 (fixtures)
from fake_substrate import Neuron, axon_of

from prism_challenge.agreement.peers import Peer, electorate
from prism_challenge.chain.factory import ChainAccess
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.metagraph import LiveMetagraph, StaticMetagraph
from prism_challenge.chain.online import OnlineSubnet


def test_online_the_electorate_is_the_permitted_validators_with_their_stake(
        client, fake, wallets):
    fake.neurons += [Neuron("5FpeerServing", permit=True, axon=axon_of("10.0.0.2:8100")),
                     Neuron("5EpeerSilent", permit=True)]
    c = client()
    metagraph = LiveMetagraph(c)
    assert metagraph.refresh()
    chain = ChainAccess(metagraph, OnlineSubnet(c, metagraph), c)
    own = wallets["validator"].hotkey.ss58_address
    assert electorate(chain, own) == [
        Peer(own, None, 1000.0),  # 10**12 rao of stake in the fake chain
        Peer("5EpeerSilent", None, 1000.0),
        Peer("5FpeerServing", "http://10.0.0.2:8100", 1000.0),
    ]  # the miners (no permit) are not in it


def test_locally_the_electorate_is_the_ledger_validators_one_unit_each(tmp_path, wallets):
    ledger = LocalLedger(tmp_path / "ledger.db")
    for name, port in (("validator", 8001), ("rival", 8002)):
        ledger.serve(wallets[name], "127.0.0.1", port)
    chain = ChainAccess(StaticMetagraph.of([]), ledger)
    own = wallets["validator"].hotkey.ss58_address
    rival = wallets["rival"].hotkey.ss58_address
    assert electorate(chain, own) == [Peer(own, None, 1.0),
                                      Peer(rival, "http://127.0.0.1:8002", 1.0)]
