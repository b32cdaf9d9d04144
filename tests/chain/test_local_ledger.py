"""The local ledger: the chain's stand-in that the validators and miners of one machine
share. Every write is the next block, the latest commitment per hotkey counts, validators
find each other's addresses."""

from __future__ import annotations

import multiprocessing as mp

from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.chain.subnet import Endpoint


def _commit_many(path: str, wallet_args: tuple[str, str], n: int) -> list[int]:
    import bittensor

    wallet = bittensor.Wallet(name=wallet_args[0], hotkey="default", path=wallet_args[1])
    ledger = LocalLedger(path)
    return [ledger.commit(wallet, f"v{i}").block for i in range(n)]


def test_every_write_takes_the_next_block_across_processes(tmp_path, wallets):
    path = str(tmp_path / "ledger.db")
    LocalLedger(path)
    args = [(path, (wallets[n].name, wallets[n].path), 15) for n in ("miner", "rival")]
    with mp.get_context("spawn").Pool(2) as pool:
        blocks = pool.starmap(_commit_many, args)
    merged = sorted(blocks[0] + blocks[1])
    assert merged == list(range(1, 31))  # no block lost or given twice
    assert all(b == sorted(b) for b in blocks)
    assert LocalLedger(path).block == 30


def test_the_latest_commitment_counts_and_carries_the_uid(tmp_path, wallets):
    miner = wallets["miner"]
    metagraph = StaticMetagraph.of(["someone", miner.hotkey.ss58_address])
    ledger = LocalLedger(tmp_path / "ledger.db", metagraph)
    assert ledger.latest_commitment(miner.hotkey.ss58_address) is None
    ledger.commit(miner, "first")
    ledger.commit(wallets["rival"], "other")
    made = ledger.commit(miner, "second")
    seen = ledger.latest_commitment(miner.hotkey.ss58_address)
    assert seen == made
    assert (seen.value, seen.block, seen.uid) == ("second", 3, 1)
    assert LocalLedger(tmp_path / "ledger.db").latest_commitment(
        wallets["rival"].hotkey.ss58_address).uid is None  # no metagraph: unknown uid


def test_addresses_are_published_once_and_replaced_when_they_change(tmp_path, wallets):
    ledger = LocalLedger(tmp_path / "ledger.db")
    validator = wallets["validator"]
    assert ledger.serve(validator, "127.0.0.1", 8001) == "published http://127.0.0.1:8001"
    assert ledger.serve(validator, "127.0.0.1", 8001) == (
        "http://127.0.0.1:8001 already published")
    assert ledger.block == 1
    ledger.serve(wallets["rival"], "127.0.0.1", 8002)
    ledger.serve(validator, "127.0.0.1", 8003)
    assert ledger.validators() == [
        Endpoint(wallets["rival"].hotkey.ss58_address, "http://127.0.0.1:8002"),
        Endpoint(validator.hotkey.ss58_address, "http://127.0.0.1:8003"),
    ]
