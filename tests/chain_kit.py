"""A fake chain for the chain and agreement tests: real wallets, the real bittensor client
over tests/fake_substrate.py; each folder's conftest.py (or a test module) imports the fixtures."""

from __future__ import annotations

from pathlib import Path

import bittensor
import pytest
from fake_substrate import FakeSubstrate, Neuron, axon_of

from prism_challenge.chain.subtensor import ChainClient

NETUID = 7


def make_wallet(root: Path, name: str) -> bittensor.Wallet:
    wallet = bittensor.Wallet(name=name, hotkey="default", path=str(root))
    wallet.create_new_coldkey(use_password=False, overwrite=True, suppress=True)
    wallet.create_new_hotkey(use_password=False, overwrite=True, suppress=True)
    return wallet


@pytest.fixture(autouse=True)
def _symbol_cache(tmp_path, monkeypatch):
    # bittensor caches token symbols under ~/.bittensor on connect; keep it in the test dir.
    monkeypatch.setenv("BTCLI_TOKEN_SYMBOLS_CACHE", str(tmp_path / "symbols.json"))


@pytest.fixture(scope="session", name="wallets")
def chain_wallets(tmp_path_factory) -> dict[str, bittensor.Wallet]:
    root = tmp_path_factory.mktemp("chain-wallets")
    return {name: make_wallet(root, name) for name in ("validator", "miner", "rival")}


@pytest.fixture(name="fake")
def fake_chain(wallets) -> FakeSubstrate:
    """netuid 7: uid 0 burn, uid 1 the validator (permit, served), uid 2 miner, uid 3 rival."""
    return FakeSubstrate(netuid=NETUID, neurons=[
        Neuron("5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM"),
        Neuron(wallets["validator"].hotkey.ss58_address, permit=True,
               axon=axon_of("10.0.0.1:8000", 900), last_update=950),
        Neuron(wallets["miner"].hotkey.ss58_address),
        Neuron(wallets["rival"].hotkey.ss58_address),
    ])


@pytest.fixture(name="client")
def chain_client(fake):
    made = []

    def build(**kwargs) -> ChainClient:
        c = ChainClient("local", NETUID, substrate=fake, **kwargs)
        made.append(c)
        return c

    yield build
    for c in made:
        c.close()
