"""A validator node in `chain.mode: online` over the real bittensor client and a fake chain:
it starts (bittensor 10's metagraph constructor made it die here), publishes its intake
address with ServeAxon, takes a committed upload, sets weights under the rate limit, and
keeps serving with a stale metagraph (weights waiting) while the chain is unreachable."""

from __future__ import annotations

import time

import httpx
import pytest
from chain_kit import NETUID

from prism_challenge.bundle import Bundle
from prism_challenge.chain.factory import connect
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.config.settings import Settings
from prism_challenge.intake.signing import sign_submission
from prism_challenge.submit import SubmissionClient
from prism_challenge.validator.demo import free_port
from prism_challenge.validator.node import ValidatorNode

TINY_ARCH = b"import torch\n\n\ndef build_model(ctx):\n    return torch.nn.Linear(4, 4)\n"
TINY_TRAIN = b"def train(ctx):\n    for batch in ctx.batches(8):\n        batch.loss.backward()\n"


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def online_node(fake, wallets, prepared_data, tmp_path):
    port = free_port()
    validator = wallets["validator"]
    fake.hyper["Tempo"] = 100  # weights go once per tempo: here the same 100 blocks
    fake.hyper["CommitRevealWeightsEnabled"] = False  # weights set directly, not committed
    settings = Settings(
        storage={"url": f"sqlite:///{tmp_path / 'prism.db'}"},
        data={"root": str(prepared_data)},
        challenge={"seq_len": 32, "token_budget": 32 * 8 * 12, "deadline_s": 30},
        scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4},
        sandbox={"cpu_threads": 1, "memory_bytes": 3 * 2**30, "save_grace_s": 3},
        chain={"mode": "online", "network": "local", "netuid": NETUID, "poll_s": 0.1,
               "refresh_blocks": 1, "serve_address": f"127.0.0.2:{port}",
               "commitment_wait_s": 1.0, "backoff_s": 0.01, "retries": 1},
        wallet={"name": validator.name, "hotkey": "default", "path": validator.path},
        intake={"port": port},
        weights={"dry_run": False, "burn_uid": 0},
        validator={"epoch_s": 0.2, "poll_s": 0.2, "work_dir": str(tmp_path / "runs")},
        llm={"enabled": False},
    )
    nodes = []

    def start():
        node = ValidatorNode(settings, chain=connect(settings, substrate=fake))
        node.start()
        nodes.append(node)
        return node, settings

    yield start
    for node in nodes:
        node.stop(timeout_s=30)


def test_an_online_validator_serves_takes_committed_uploads_and_sets_weights(
        online_node, fake, wallets):
    node, settings = online_node()
    health = httpx.get(f"{node.url}/v1/health", timeout=10).json()
    assert (health["block"], health["stale"], health["hotkey"]) == (
        1000, False, wallets["validator"].hotkey.ss58_address)
    # The intake address is published once (it differs from the one on chain).
    wait_for(lambda: fake.sent("serve_axon"), 10, "ServeAxon")
    (served,) = fake.sent("serve_axon")
    assert (served.params["ip"], served.params["port"]) == (2130706434, settings.intake.port)

    # Weights: not before the rate limit (last set at 950, limit 100), then once.
    time.sleep(0.5)
    assert fake.sent("set_mechanism_weights") == []
    fake.block = 1050
    wait_for(lambda: fake.sent("set_mechanism_weights"), 10, "weights")
    (weights,) = fake.sent("set_mechanism_weights")
    assert weights.params["dests"] == [0] and weights.params["version_key"] == 1_003_000
    time.sleep(0.6)
    assert len(fake.sent("set_mechanism_weights")) == 1  # rate limited until block 1150
    # /v1/weights shows the vector as conformed to the subnet's rules, as it was sent.
    shown = httpx.get(f"{node.url}/v1/weights", timeout=10).json()
    assert (shown["uids"], shown["weights_u16"]) == ([0], [65535]) == (
        weights.params["dests"], weights.params["weights"])
    assert shown["as_sent"] == "unchanged by the subnet's weight rules"

    # A miner commits on chain, then uploads: accepted with its commitment's block.
    miner = wallets["miner"]
    bundle = Bundle({"architecture.py": TINY_ARCH, "training.py": TINY_TRAIN})
    node.chain.subnet.commit(miner, commitment_value(miner.hotkey.ss58_address, bundle.digest))
    with SubmissionClient(node.url, signer=miner) as client:
        receipt = client.submit(bundle)
    assert (receipt.hotkey, receipt.block) == (miner.hotkey.ss58_address, 1050)

    # The chain goes away: intake and health keep working on the last view, weights wait.
    fake.down = True
    wait_for(lambda: httpx.get(f"{node.url}/v1/health", timeout=10).json()["stale"], 10,
             "a stale view")
    fake.block = 1200
    wait_for(lambda: node.chain.status.weights["stale"] > 0, 10, "weights waiting")
    metrics = httpx.get(f"{node.url}/metrics", timeout=10).text
    assert "prism_chain_metagraph_stale 1.0" in metrics
    assert 'prism_weights_attempts_total{outcome="set"} 1.0' in metrics
    assert len(fake.sent("set_mechanism_weights")) == 1


def test_a_validator_started_while_the_chain_is_down_waits_for_it(online_node, fake, wallets):
    fake.down = True
    node, _ = online_node()
    health = httpx.get(f"{node.url}/v1/health", timeout=10).json()
    assert (health["stale"], health["block"]) == (True, None)
    body = Bundle({"architecture.py": TINY_ARCH, "training.py": TINY_TRAIN}).to_wire()
    headers = sign_submission(wallets["miner"], body, receiver=node.hotkey)
    refused = httpx.post(f"{node.url}/v1/submissions", content=body, headers=headers)
    assert refused.status_code == 503 and refused.json()["rule"] == "CHAIN_UNAVAILABLE"
    assert fake.extrinsics == []  # no weights, no axon without a view of the subnet
    fake.down = False
    wait_for(lambda: not httpx.get(f"{node.url}/v1/health", timeout=10).json()["stale"], 10,
             "the first metagraph")
    wait_for(lambda: fake.sent("serve_axon"), 10, "ServeAxon once the chain is back")
