"""Fixtures of the boundary fuzzing: a real node (uvicorn on 127.0.0.1, SQLite) and its keys."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import bittensor
import httpx
import pytest
from fuzz_kit import CommitCounter, make_wallet, valid_files

from prism_challenge.api import ApiDeps, ApiServer
from prism_challenge.bundle import Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.config.settings import Settings
from prism_challenge.intake.signing import sign_submission
from prism_challenge.storage import Store
from prism_challenge.validator.app import create_app

NETUID = 7


@dataclass
class FuzzNode:
    """A live node and what a fuzzing test needs to judge its answers."""

    url: str
    db: Path
    miner: object  # a registered hotkey (bittensor Keypair)
    stranger: object  # a hotkey the metagraph does not hold
    receiver: str  # the node's own hotkey: requests are signed for it
    ledger: LocalLedger
    wallets: dict[str, bittensor.Wallet]
    data_version: CommitCounter  # unchanged across a request: the request wrote nothing

    def signed(self, signer, body: bytes) -> dict[str, str]:
        """Commit sha256(body) for `signer` (as `prism submit` does), then sign for this node,
        so that what the node decides is the size or the bundle, not a missing commitment."""
        wallet = self.wallets[signer.ss58_address]
        self.ledger.commit(wallet, commitment_value(signer.ss58_address,
                                                    hashlib.sha256(body).hexdigest()))
        return sign_submission(signer, body, receiver=self.receiver)


@pytest.fixture(scope="module")
def fuzz_node(tmp_path_factory) -> FuzzNode:
    """The validator's whole app (every router) over a real SQLite store on a real server,
    holding one accepted submission so that reads of an existing row are fuzzed too."""
    root = tmp_path_factory.mktemp("fuzz-node")
    wallets = {name: make_wallet(root / "wallets", name)
               for name in ("validator", "miner", "stranger")}
    miner, stranger = wallets["miner"].hotkey, wallets["stranger"].hotkey
    receiver = wallets["validator"].hotkey.ss58_address
    db = root / "prism.db"
    store = Store(f"sqlite:///{db}")
    settings = Settings(chain={"netuid": NETUID}, validator={"work_dir": str(root / "runs")})
    metagraph = StaticMetagraph.of([receiver, miner.ss58_address], block=10)
    ledger = LocalLedger(root / "ledger.db", metagraph)
    server = ApiServer(create_app(ApiDeps(settings=settings, store=store, metagraph=metagraph,
                                          hotkey=receiver, subnet=ledger,
                                          signer=wallets["validator"])))
    url = server.start()
    node = FuzzNode(url=url, db=db, miner=miner, stranger=stranger, receiver=receiver,
                    ledger=ledger, wallets={w.hotkey.ss58_address: w for w in wallets.values()},
                    data_version=CommitCounter(db))
    before = node.data_version()
    body = Bundle(valid_files("seed")).to_wire()
    seeded = httpx.post(f"{url}/v1/submissions", content=body, headers=node.signed(miner, body))
    assert seeded.status_code == 201, seeded.text
    assert node.data_version() != before  # the counter sees the server's writes
    yield node
    node.data_version.close()
    server.stop()
    store.close()
