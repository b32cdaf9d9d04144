"""`ChainClient` drives the real bittensor 11 client (reads, intents, executor) over a fake
chain: what it reads is decoded by the library, what it writes is composed by the library.
A call the adapter makes that the installed bittensor lacks fails here."""

from __future__ import annotations

import inspect
import ipaddress
import time

import bittensor
import pytest
from chain_kit import NETUID
from fake_substrate import axon_of

from prism_challenge.chain import subtensor
from prism_challenge.chain.subtensor import ChainUnavailable


def test_the_client_is_bittensors_own_subtensor_over_the_injected_connection(client, fake):
    c = client()
    assert type(c._subtensor) is bittensor.Subtensor
    assert c.block() == fake.block
    assert c._client._substrate is fake  # the library's client, on our fake connection


def test_metagraph_is_read_and_decoded_by_the_library(client, fake, wallets):
    graph = client().metagraph()
    assert isinstance(graph, bittensor.Metagraph)
    assert graph.block == 1000 and graph.netuid == NETUID
    assert graph.hotkeys == [n.hotkey for n in fake.neurons]
    validator = graph.by_hotkey(wallets["validator"].hotkey.ss58_address)
    assert (validator.uid, validator.validator_permit, validator.axon, validator.last_update) == (
        1, True, "10.0.0.1:8000", 950)
    assert validator.total_stake.rao == 10**12
    assert [n.uid for n in graph.validators] == [1]
    assert ("SubnetInfoRuntimeApi", "get_metagraph") in fake.reads


def test_a_missing_subnet_is_an_error_not_an_empty_view(client, fake):
    fake.netuid = 99
    with pytest.raises(ChainUnavailable, match="netuid 7 does not exist"):
        client().metagraph()


def test_commitment_is_set_as_a_raw_field_signed_by_the_hotkey_and_read_back_with_its_block(
        client, fake, wallets):
    c = client(period_blocks=20)
    miner = wallets["miner"]
    c.set_commitment(miner, "prism1:" + "ab" * 32)
    (sent,) = fake.sent("set_commitment")
    assert (sent.module, sent.signer, sent.period) == (
        "Commitments", miner.hotkey.ss58_address, 20)
    assert sent.params == {"netuid": NETUID,
                           "info": {"fields": [{"Raw71": ("prism1:" + "ab" * 32).encode()}]}}
    fake.block = 1005
    seen = c.commitments()[miner.hotkey.ss58_address]
    assert (seen.value, seen.block, seen.uid, seen.status) == (
        "prism1:" + "ab" * 32, 1000, 2, "plain")


def test_a_commitment_over_128_bytes_is_refused_before_signing(client, fake, wallets):
    with pytest.raises(ValueError, match="1 to 128 bytes"):
        client().set_commitment(wallets["miner"], "x" * 129)
    assert fake.extrinsics == []


def test_weights_rules_come_from_the_subnets_hyperparameters(client, fake):
    fake.hyper.update(WeightsSetRateLimit=360, CommitRevealWeightsEnabled=True,
                      WeightsVersionKey=1_000_000)
    rules = client().weights_rules()
    assert (rules.block, rules.rate_limit, rules.commit_reveal, rules.min_version_key) == (
        1000, 360, True, 1_000_000)


def test_set_weights_composes_set_mechanism_weights_with_u16_and_the_version_key(
        client, fake, wallets):
    fake.block = 1100  # 150 blocks after the validator's last update: the rate limit passed
    fake.hyper["CommitRevealWeightsEnabled"] = False  # a plain set (new subnets commit)
    client(period_blocks=12).set_weights(wallets["validator"], [0, 2], [65535.0, 21845.0],
                                         version_key=1_000_000)
    (sent,) = fake.extrinsics
    assert (sent.function, sent.signer, sent.period) == (
        "set_mechanism_weights", wallets["validator"].hotkey.ss58_address, 12)
    assert sent.params == {"netuid": NETUID, "mecid": 0, "dests": [0, 2],
                           "weights": [65535, 21845], "version_key": 1_000_000}
    assert fake.neurons[1].last_update == 1100


def test_commit_reveal_subnets_get_a_timelocked_commit(client, fake, wallets):
    fake.block = 1100  # commit-reveal is on: the fake's default, like a new subnet's
    client().set_weights(wallets["validator"], [0], [1.0], version_key=3)
    (sent,) = fake.extrinsics
    assert sent.function == "commit_timelocked_mechanism_weights"
    assert sent.params["netuid"] == NETUID and sent.params["reveal_round"] > 0
    assert isinstance(sent.params["commit"], bytes) and len(sent.params["commit"]) > 32


def test_the_chains_rate_limit_preflight_refuses_before_anything_is_signed(client, fake, wallets):
    fake.block = 1010  # 60 blocks after block 950, the limit is 100
    with pytest.raises(bittensor.ChainError) as refused:
        client().set_weights(wallets["validator"], [0], [1.0], version_key=0)
    assert refused.value.code == bittensor.ErrorCode.RATE_LIMITED
    assert fake.extrinsics == []


def test_a_refusal_on_chain_is_a_chain_error(client, fake, wallets):
    fake.block, fake.reject = 1100, "IncorrectWeightVersionKey"
    with pytest.raises(bittensor.ChainError, match="IncorrectWeightVersionKey"):
        client().set_weights(wallets["validator"], [0], [1.0], version_key=0)


@pytest.mark.parametrize("status", ["dropped", "invalid", "usurped", "retracted",
                                    "finalitytimeout"])
def test_the_pools_fate_for_a_write_is_transient_not_a_refusal(status):
    from bittensor.result import chain_error_from_substrate_request

    # What the library raises when the pool's watch reports this status for our extrinsic.
    error = chain_error_from_substrate_request(
        RuntimeError(f"Extrinsic {status}: {{'{status}': None}}"))
    assert error.name is not None and subtensor.transient(error)
    future = chain_error_from_substrate_request(
        RuntimeError("Transaction will be valid in the future"))
    assert future.name == "Future" and subtensor.transient(future)
    assert not subtensor.transient(bittensor.ChainError("MaxWeightExceeded", "MaxWeightExceeded"))


def test_serve_axon_composes_the_address_and_serving_rules_read_the_axon_block(
        client, fake, wallets):
    c = client()
    rules = c.serving_rules(wallets["validator"].hotkey.ss58_address)
    assert (rules.block, rules.rate_limit, rules.last_served) == (1000, 50, 900)
    assert c.serving_rules(wallets["miner"].hotkey.ss58_address).last_served is None
    c.serve_axon(wallets["validator"], "203.0.113.7", 8001)
    (sent,) = fake.sent("serve_axon")
    assert sent.params == {"netuid": NETUID, "version": 1, "ip": 3405803783, "port": 8001,
                           "ip_type": 4, "protocol": 4, "placeholder1": 0, "placeholder2": 0}
    assert fake.neurons[1].axon == axon_of("203.0.113.7:8001", 1000)


def test_an_unreachable_chain_is_chain_unavailable(client, fake):
    fake.down = True
    with pytest.raises(ChainUnavailable, match="cannot reach local"):
        client().metagraph()


def test_a_write_that_never_returns_is_cut_by_the_timeout(client, fake, wallets):
    fake.block, fake.hang = 1100, True
    c = client(timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(ChainUnavailable, match="did not answer within 0.5 s"):
        c.set_weights(wallets["validator"], [0], [1.0], version_key=0)
    assert time.monotonic() - started < 5
    fake.hang = False
    assert c.block() == 1100  # the client still works after a timed-out call


def test_every_bittensor_name_the_adapter_uses_exists_in_the_installed_package():
    # The behaviour tests above run each path; this lists the names so a rename is named.
    source = inspect.getsource(subtensor)
    for name in ("Subtensor", "SetWeights", "ServeAxon", "ExtrinsicResult",
                 "RpcConnectionError", "Metagraph", "NeuronCommitment", "calls", "storage"):
        assert f"bittensor.{name}" in source
        assert hasattr(bittensor, name), name
    assert hasattr(bittensor.calls.Commitments, "set_commitment")
    for item in ("WeightsVersionKey", "ServingRateLimit", "Axons", "MaxWeightsLimit",
                 "MinAllowedWeights", "Tempo", "ActivityCutoffFactorMilli", "ActivityCutoff"):
        assert hasattr(bittensor.storage.SubtensorModule, item)
    namespaces = bittensor.Client("local")
    assert callable(namespaces.subnets.metagraph) and callable(namespaces.subnets.commitments)
    assert callable(namespaces.hyperparameters.weights_rate_limit)
    assert callable(namespaces.subnets.commit_reveal_enabled)


def test_writes_dropped_from_the_pool_do_not_jam_the_next_one(client, fake, wallets):
    c = client(timeout_s=0.3)
    fake.drop = 3  # three commitments time out in the pool; the chain still expects nonce 0
    for _ in range(3):
        with pytest.raises(ChainUnavailable, match="did not answer within 0.3 s"):
            c.set_commitment(wallets["miner"], "prism1:" + "a" * 64)
    c.set_commitment(wallets["miner"], "prism1:" + "b" * 64)  # signed with nonce 0: lands
    hotkey = wallets["miner"].hotkey.ss58_address
    assert fake.signed_nonces == [0, 0, 0, 0]
    assert fake.nonces[hotkey] == 1
    assert fake.commitments[hotkey]["block"] == fake.block


def test_a_read_error_and_a_bare_write_failure_are_unavailable_not_refusals(
        client, fake, wallets):
    c = client()
    fake.raise_next = bittensor.ChainError("RPC error: state already discarded")
    with pytest.raises(ChainUnavailable, match="state already discarded"):
        c.commitments()
    fake.raise_next = bittensor.ChainError("Connection closed during submit")
    with pytest.raises(ChainUnavailable, match="Connection closed during submit"):
        c.set_commitment(wallets["miner"], "prism1:" + "c" * 64)
    fake.reject = "SettingWeightsTooFast"  # a named refusal stays the chain's refusal
    fake.block = 1100
    with pytest.raises(bittensor.ChainError) as refused:
        c.serve_axon(wallets["validator"], "10.0.0.2", 8000)
    assert refused.value.code == bittensor.ErrorCode.RATE_LIMITED
    c.set_commitment(wallets["miner"], "prism1:" + "c" * 64)  # the next write lands
    assert fake.commitments[wallets["miner"].hotkey.ss58_address]["block"] == 1100


def test_a_dropped_connection_is_closed_even_when_the_client_closes_right_after(client, fake):
    """After a call timed out, the old connection is closed on the client's loop; a client
    closed at once waits for that close instead of stopping the loop under it (which left
    the connection open and its close never awaited)."""
    c = client()
    c.block()
    fake.nonce_cache["5-marker"] = 7  # what only the old connection's close clears
    c._reconnect()
    c.close()
    assert fake.nonce_cache == {}


@pytest.mark.parametrize(("ip", "refused"), [
    ("127.0.0.1", True), ("255.255.255.255", True), ("::1", True),
    ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", True),
    # is_valid_ip_address refuses only those: ServeAxon allows zero, the rest of loopback
    ("0.0.0.0", False), ("127.0.0.2", False), ("203.0.113.7", False), ("2001:db8::1", False),
])
def test_an_axon_address_the_chain_refuses_is_refused_by_name_and_stores_nothing(
        client, fake, wallets, ip, refused):
    fake.block = 1000 + 50  # past the serving rate limit of the axon served at 900
    before = fake.neurons[1].axon
    c = client()
    if refused:
        with pytest.raises(bittensor.ChainError) as error:
            c.serve_axon(wallets["validator"], ip, 8000)
        assert (error.value.name, error.value.code) == (
            "InvalidIpAddress", bittensor.ErrorCode.INVALID_ARGUMENT)
        assert fake.neurons[1].axon == before
    else:
        c.serve_axon(wallets["validator"], ip, 8000)
        assert fake.neurons[1].axon["ip"] == int(ipaddress.ip_address(ip))


def test_serve_axon_is_checked_in_the_pallets_order(client, fake, wallets):
    c = client()
    fake.block = 940  # inside the serving rate limit (served at 900, limit 50)
    with pytest.raises(bittensor.ChainError, match="InvalidIpAddress"):
        c.serve_axon(wallets["validator"], "127.0.0.1", 8000)  # the address comes first
    with pytest.raises(bittensor.ChainError, match="ServingRateLimitExceeded"):
        c.serve_axon(wallets["validator"], "203.0.113.7", 0)  # then the limit, then the port
    fake.block = 950
    with pytest.raises(bittensor.ChainError, match="InvalidPort"):
        c.serve_axon(wallets["validator"], "203.0.113.7", 0)
    fake.neurons.pop()
    with pytest.raises(bittensor.ChainError, match="HotKeyNotRegisteredInNetwork"):
        c.serve_axon(wallets["rival"], "127.0.0.1", 8000)
