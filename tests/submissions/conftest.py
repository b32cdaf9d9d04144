"""Fixtures of the submissions tests: real bittensor wallets, tiny bundles, a live node."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import bittensor
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from prism_challenge.api import ApiDeps, create_app
from prism_challenge.api.errors import install_error_handlers
from prism_challenge.bundle import Bundle
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.intake import routes as intake_routes
from prism_challenge.intake.signing import sign_request
from prism_challenge.storage import Store
from prism_challenge.storage.tables import Nonce, Submission

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

    def counts(self) -> tuple[int, int]:
        """(submission rows, nonce rows): what a refusal must leave unchanged."""
        with self.store.session() as session:
            subs = session.scalar(select(func.count(Submission.id)))
            nonces = session.scalar(select(func.count(Nonce.id)))
        return subs, nonces

    def post(self, signer, body: bytes, *, timestamp=None, nonce=None, netuid=NETUID, **extra):
        """Sign `body` as `signer` and POST it; `extra` overrides headers after signing."""
        signed = sign_request(
            signer,
            netuid=netuid,
            body=body,
            timestamp=self.clock() if timestamp is None else timestamp,
            nonce=nonce,
        )
        headers = {**signed.as_http(), **extra}
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
    return {name: make_wallet(root, name) for name in ("miner", "rival", "stranger")}


@pytest.fixture
def miner(wallets):
    return wallets["miner"].hotkey


@pytest.fixture
def rival(wallets):
    return wallets["rival"].hotkey


@pytest.fixture
def stranger(wallets):
    return wallets["stranger"].hotkey


@pytest.fixture
def make_node(store, live_server, wallets):
    """Start a node on a live server; the stranger's hotkey is never registered."""

    def start(**intake) -> Node:
        settings = Settings(chain={"netuid": NETUID}, intake={"rate_limit_count": 3, **intake})
        metagraph = StaticMetagraph.of(
            [wallets["miner"].hotkey.ss58_address, wallets["rival"].hotkey.ss58_address],
            block=BLOCK,
        )
        clock = Clock()
        app = create_app(ApiDeps(settings=settings, store=store, metagraph=metagraph, clock=clock))
        return Node(live_server(app), store, clock, settings)

    return start


@pytest.fixture
def intake_app(store, wallets):
    """An app with only this stage's routes (plus `extra_routes`), whatever ROUTERS holds."""

    def build(extra_routes=()) -> FastAPI:
        deps = ApiDeps(
            settings=Settings(chain={"netuid": NETUID}),
            store=store,
            metagraph=StaticMetagraph.of([wallets["miner"].hotkey.ss58_address], block=BLOCK),
        )
        app = FastAPI()
        install_error_handlers(app)
        app.include_router(intake_routes.build(deps))
        for path, endpoint in extra_routes:
            app.add_api_route(path, endpoint, methods=["GET"])
        return app

    return build


@pytest.fixture
def node(make_node) -> Node:
    return make_node()
