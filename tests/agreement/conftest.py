"""Fixtures of the agreement tests: three validators with wallets, stores and metagraph."""

from __future__ import annotations

import pytest
from agreement_kit import Node, make_wallet, settings

from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.storage import Store


@pytest.fixture(scope="session")
def wallets(tmp_path_factory):
    root = tmp_path_factory.mktemp("agreement-wallets")
    return {name: make_wallet(root, name)
            for name in ("a", "b", "c", "liar", "mallory", "miner1", "miner2")}


@pytest.fixture
def nodes(tmp_path, wallets):
    """Validators a, b, c and liar (not serving yet), miners miner1 (uid 4), miner2 (uid 5)."""
    hotkeys = [wallets[n].hotkey.ss58_address for n in ("a", "b", "c", "liar", "miner1",
                                                        "miner2")]
    metagraph = StaticMetagraph.of(hotkeys)
    made = {}
    for name in ("a", "b", "c", "liar"):
        made[name] = Node(name, wallets[name], Store(f"sqlite:///{tmp_path / name}.db"),
                          settings(), metagraph)
    yield made
    for node in made.values():
        node.store.close()
