"""A fake chain for the chain and agreement tests: real wallets, the real bittensor client
over tests/fake_substrate.py; each folder's conftest.py (or a test module) imports the fixtures."""

from __future__ import annotations

from pathlib import Path

import bittensor
import pytest
from fake_substrate import FakeSubstrate, Neuron, axon_of

from prism_challenge.chain.metagraph import LiveMetagraph
from prism_challenge.chain.status import ChainStatus
from prism_challenge.chain.subtensor import ChainClient
from prism_challenge.config.settings import Settings
from prism_challenge.weights.chain import WeightSetter

NETUID = 7
OWNER_HOTKEY = "5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM"
SETTER_SETTINGS = Settings(chain={"mode": "online", "netuid": NETUID, "retries": 3,
                                  "backoff_s": 2.0}, weights={"dry_run": False})


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
    """netuid 7: uid 0 the subnet owner's hotkey (registered with the subnet, as the chain
    does, and never replaced), uid 1 the validator (permit, served), uid 2 miner, uid 3
    rival."""
    return FakeSubstrate(netuid=NETUID, owner_hotkey=OWNER_HOTKEY, neurons=[
        Neuron(OWNER_HOTKEY),
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


@pytest.fixture(name="setter_on")
def weight_setter_on(client, fake, wallets):
    """`setter_on(**hyper)`: the subnet's hyperparameters updated (tempo 100: one tempo is the
    weights rate limit, unless given), the metagraph read, and the validator's WeightSetter
    (retries 3, backoff from 2 s, sleeps recorded); returns (view, setter, sleeps, status)."""
    def build(**hyper):
        fake.hyper.update({"Tempo": 100, **hyper})
        status = ChainStatus()
        view = LiveMetagraph(client(), refresh_blocks=1000, status=status)
        view.refresh()
        sleeps: list[float] = []
        setter = WeightSetter(view._client, wallets["validator"], SETTER_SETTINGS,
                              status=status, sleep=sleeps.append)
        return view, setter, sleeps, status

    return build
