"""Two validator nodes online on one (fake) chain, each with its own store and its own
measurements of the same two runs: their peer loops find each other through the
metagraph's axons, fetch and verify each other's signed pages, and both end up serving
the same leader at /v1/weights, where their own measurements picked different ones."""

from __future__ import annotations

import time

import httpx
import pytest
from bittensor.sp_core import Keypair

# The fake chain's fixtures; its `wallets` (validator, miner, rival) stand in for this folder's.
from chain_kit import _symbol_cache, chain_wallets, fake_chain  # noqa: F401 (fixtures)
from fake_substrate import Neuron
from validator_kit import wait_for

from prism_challenge.chain.factory import connect
from prism_challenge.config.settings import Settings
from prism_challenge.storage.tables import Score, Submission, Verification
from prism_challenge.validator.demo import free_port
from prism_challenge.validator.node import ValidatorNode

MINER2 = Keypair.create_from_seed(bytes([9]) * 32).ss58_address
LONG_AGO = time.time() - 3600


def scored(node: ValidatorNode, digest: str, miner: str, block: int, uid: int, bpb: float):
    with node.store.session() as s:
        sub = Submission(digest=digest, hotkey=miner, status="scored", attempts=1,
                         accepted_at=LONG_AGO, block=block, uid=uid, updated_at=LONG_AGO,
                         reviewed="passed", bundle=b"x")
        s.add(sub)
        s.flush()
        s.add(Score(submission_id=sub.id, bpb=bpb, heldout_delta=0.5, eligible=True,
                    corpus="demo", detail={}, created_at=LONG_AGO))
        s.add(Verification(submission_id=sub.id, status="passed", attempts=1,
                           created_at=LONG_AGO, updated_at=LONG_AGO))


@pytest.fixture
def two_nodes(fake, wallets, prepared_data, tmp_path):
    fake.neurons[1].axon = None  # nothing served yet: each node publishes its own address
    fake.neurons[3] = Neuron(wallets["rival"].hotkey.ss58_address, permit=True)
    fake.neurons.append(Neuron(MINER2))
    nodes = []
    for name in ("validator", "rival"):
        port = free_port()
        settings = Settings(
            storage={"url": f"sqlite:///{tmp_path / name / 'prism.db'}"},
            data={"root": str(prepared_data)},
            challenge={"seq_len": 32, "token_budget": 32 * 8 * 12, "deadline_s": 30},
            sandbox={"cpu_threads": 1, "memory_bytes": 3 * 2**30, "save_grace_s": 3},
            chain={"mode": "online", "network": "local", "netuid": fake.netuid, "poll_s": 0.1,
                   "refresh_blocks": 1, "serve_address": f"127.0.0.2:{port}",
                   "backoff_s": 0.01, "retries": 1},
            wallet={"name": wallets[name].name, "hotkey": "default",
                    "path": wallets[name].path},
            intake={"host": "127.0.0.2", "port": port},
            weights={"winner_share": 1.0, "research_share": 0.0},
            agreement={"poll_s": 0.2, "timeout_s": 5},
            validator={"epoch_s": 0.5, "poll_s": 0.2, "work_dir": str(tmp_path / name),
                       "update_check": False},
            llm={"enabled": False},
        )
        node = ValidatorNode(settings, chain=connect(settings, substrate=fake))
        nodes.append(node)
    yield nodes
    for node in nodes:
        node.stop(timeout_s=30)


def test_two_online_validators_converge_on_the_same_leader(two_nodes, fake, wallets):
    a, b = two_nodes
    miner = wallets["miner"].hotkey.ss58_address
    for node, y_bpb in ((a, 0.990), (b, 0.998)):  # a: Y dethrones X; b: it does not
        scored(node, "1" * 64, miner, 1, 2, 1.000)
        scored(node, "2" * 64, MINER2, 2, 4, y_bpb)

    def leaders() -> dict[str, dict] | None:
        """Each node's served leader, once each has stored a good page of the other."""
        if not all(n.agreement.rows[o.hotkey] for n, o in ((a, b), (b, a))):
            return None
        return {n.hotkey: httpx.get(f"{n.url}/v1/weights", timeout=10).json()["leader"]
                for n in (a, b)}

    for node in (a, b):
        node.start()
    wait_for(lambda: len(fake.sent("serve_axon")) == 2, 20, "both axons published")
    fake.block += 1  # the next metagraph read sees both axons
    got = wait_for(leaders, 30, "each node to store the other's measurements")
    # two equal stakes: the (lower) median of 0.990 and 0.998; b alone would keep X
    assert {(x["hotkey"], x["bpb"]) for x in got.values()} == {(MINER2, 0.990)}
    assert a.agreement.refused() == b.agreement.refused() == 0
    metrics = httpx.get(f"{b.url}/metrics", timeout=10).text
    assert f'prism_agreement_rows_total{{peer="{a.hotkey}"}} 2.0' in metrics
