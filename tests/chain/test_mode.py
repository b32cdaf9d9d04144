"""Which chain a node is on is explicit: production refuses every local-only setting by name,
a network bittensor does not know is refused, and chain flags switch the node online."""

from __future__ import annotations

import pytest

from prism_challenge.cli.common import chain_line, with_chain_flags
from prism_challenge.config import Settings


def test_production_names_each_unsafe_setting():
    with pytest.raises(ValueError) as info:
        Settings(mode="production", chain={"allow_any_hotkey": True,
                                           "metagraph_file": "m.json"},
                 sandbox={"backend": "none"})
    text = str(info.value)
    for needle in ("chain.mode 'local'", "chain.allow_any_hotkey true",
                   "chain.metagraph_file", "sandbox.backend 'none'"):
        assert needle in text


def test_production_online_with_defaults_is_accepted():
    s = Settings(mode="production", chain={"mode": "online", "network": "test"})
    assert s.unsafe_on_a_network() == []
    assert Settings().unsafe_on_a_network()[0].startswith("chain.mode 'local'")


def test_unknown_network_in_the_config_is_refused():
    with pytest.raises(ValueError, match="unknown network 'testnet': use one of archive"):
        Settings(chain={"network": "testnet"})


def test_network_flag_switches_online_and_off_any_hotkey():
    base = Settings()
    assert (base.chain.mode, base.chain.allow_any_hotkey) == ("local", True)
    online = with_chain_flags(base, network="test", netuid=5)
    assert (online.chain.mode, online.chain.allow_any_hotkey) == ("online", False)
    assert (online.chain.network, online.chain.netuid) == ("test", 5)
    assert chain_line(online, 123) == (
        "chain: test (wss://test.finney.opentensor.ai:443), netuid 5, block 123")
    local = with_chain_flags(base, netuid=5)  # a netuid alone picks the ledger's subnet
    assert local.chain.mode == "local"
    assert chain_line(local, None).startswith("chain: LOCAL ledger prism-data/local-chain.db")
