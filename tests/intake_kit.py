"""A live intake node for the intake and `prism submit` tests: real bittensor wallets, tiny
bundles; tests/intake/ and tests/submit/ take its fixtures through their conftest.py.

The node's commitments come from a real `LocalLedger` file; `Node.post` commits the body's
digest for the signer first (as `prism submit` does) unless told not to.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import bittensor
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from prism_challenge.api import ApiDeps, health
from prism_challenge.api.errors import install_error_handlers
from prism_challenge.bundle import Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.config.settings import Settings
from prism_challenge.intake import routes as intake_routes
from prism_challenge.intake.signing import sign_submission
from prism_challenge.storage import Store
from prism_challenge.storage.tables import Nonce, Submission
from prism_challenge.validator.app import create_app

NETUID = 7
BLOCK = 4242
ARCH = b"import torch\n\n\ndef build_model(ctx):\n    return torch.nn.Linear(4, 4)\n"
TRAIN = b"def train(ctx):\n    for batch in ctx.batches(8):\n        batch.loss.backward()\n"


def make_wallet(root: Path, name: str) -> bittensor.Wallet:
    wallet = bittensor.Wallet(name=name, hotkey="default", path=str(root))
    wallet.create_new_coldkey(use_password=False, overwrite=True, suppress=True)
    wallet.create_new_hotkey(use_password=False, overwrite=True, suppress=True)
    return wallet


def tiny_files(tag: str = "") -> dict[str, bytes]:
    """The files of a valid bundle; a different `tag` gives a different digest."""
    return {"architecture.py": ARCH, "training.py": TRAIN + f"# {tag}\n".encode()}


class Clock:
    """Wall time plus an offset the test moves (freshness and rate windows without sleeping)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@dataclass
class Node:
    url: str
    store: Store
    clock: Clock
    settings: Settings
    hotkey: str  # the validator's: the receiver requests are signed for
    ledger: LocalLedger
    wallets: dict[str, bittensor.Wallet]

    def counts(self) -> tuple[int, int]:
        """(submission rows, nonce rows): what a refusal must leave unchanged."""
        with self.store.session() as session:
            subs = session.scalar(select(func.count(Submission.id)))
            nonces = session.scalar(select(func.count(Nonce.id)))
        return subs, nonces

    def commit(self, signer, body: bytes) -> int:
        """Commit sha256(body) (a wire body's digest) for `signer`; returns the block."""
        wallet = next(w for w in self.wallets.values()
                      if w.hotkey.ss58_address == signer.ss58_address)
        value = commitment_value(signer.ss58_address, hashlib.sha256(body).hexdigest())
        return self.ledger.commit(wallet, value).block

    def sign(self, signer, body: bytes, *, timestamp=None, nonce_ns=None, receiver=None):
        stamp = self.clock() if timestamp is None else timestamp
        return sign_submission(signer, body, receiver=receiver or self.hotkey,
                               nonce_ns=nonce_ns if nonce_ns is not None else int(stamp * 1e9))

    def post(self, signer, body: bytes, *, commit=True, timestamp=None, nonce_ns=None,
             receiver=None, **extra):
        """Commit (unless told not to), sign `body` as `signer` for this node and POST it;
        `extra` overrides headers after signing."""
        if commit:
            self.commit(signer, body)
        headers = {**self.sign(signer, body, timestamp=timestamp, nonce_ns=nonce_ns,
                               receiver=receiver), **extra}
        return httpx.post(f"{self.url}/v1/submissions", content=body, headers=headers)


@pytest.fixture
def make_bundle():
    return lambda tag="": Bundle(tiny_files(tag))


@pytest.fixture
def bundle_dir(tmp_path):
    """Write a valid bundle directory (tagged) and return its path."""

    def write(tag: str = "") -> Path:
        path = tmp_path / f"bundle-{tag or 'plain'}"
        path.mkdir()
        for name, data in tiny_files(tag).items():
            (path / name).write_bytes(data)
        return path

    return write


@pytest.fixture(scope="session")
def wallets(tmp_path_factory) -> dict[str, bittensor.Wallet]:
    root = tmp_path_factory.mktemp("wallets")
    return {name: make_wallet(root, name)
            for name in ("validator", "miner", "rival", "stranger")}


@pytest.fixture
def miner(wallets):
    return wallets["miner"].hotkey


@pytest.fixture
def rival(wallets):
    return wallets["rival"].hotkey


@pytest.fixture
def stranger(wallets):
    return wallets["stranger"].hotkey


def registered(wallets) -> StaticMetagraph:
    """uid 0 the validator, uid 1 the miner, uid 2 the rival; the stranger is not registered."""
    return StaticMetagraph.of([wallets[n].hotkey.ss58_address
                               for n in ("validator", "miner", "rival")], block=BLOCK)


@pytest.fixture
def make_node(store, live_server, wallets, tmp_path):
    """Start a node on a live server; the stranger's hotkey is never registered."""

    def start(chain=None, **intake) -> Node:
        settings = Settings(chain={"netuid": NETUID, "commitment_wait_s": 0.3, **(chain or {})},
                            intake={"rate_limit_count": 3, **intake})
        metagraph = registered(wallets)
        ledger = LocalLedger(tmp_path / "ledger.db", metagraph)
        clock = Clock()
        hotkey = wallets["validator"].hotkey.ss58_address
        app = create_app(ApiDeps(settings=settings, store=store, metagraph=metagraph, clock=clock,
                                 hotkey=hotkey, subnet=ledger))
        return Node(live_server(app), store, clock, settings, hotkey, ledger, wallets)

    return start


@pytest.fixture
def intake_app(store, wallets, tmp_path):
    """An app with only this stage's routes (plus `extra_routes`), whatever ROUTERS holds.
    Its ledger is `tmp_path / "ledger.db"` (pass it to `prism submit` with --config)."""
    ledger_path = tmp_path / "ledger.db"

    def build(extra_routes=()) -> FastAPI:
        metagraph = registered(wallets)
        deps = ApiDeps(
            settings=Settings(chain={"netuid": NETUID, "local_ledger": str(ledger_path)}),
            store=store,
            metagraph=metagraph,
            hotkey=wallets["validator"].hotkey.ss58_address,
            subnet=LocalLedger(ledger_path, metagraph),
        )
        app = FastAPI()
        install_error_handlers(app)
        app.include_router(health.build(deps))  # the client reads the receiver hotkey there
        app.include_router(intake_routes.build(deps))
        for path, endpoint in extra_routes:
            app.add_api_route(path, endpoint, methods=["GET"])
        return app

    return build


@pytest.fixture
def node(make_node) -> Node:
    return make_node()
