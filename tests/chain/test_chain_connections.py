"""`ChainClient` from several threads (intake, the epoch loop, the chain loop) over one
connection: a reconnect after one thread's failure never closes the connection under
another thread's call, concurrent first calls open one connection, and a connection opened
before a reconnect is never put back in use."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import bittensor
import pytest
from fake_substrate import FakeConnection

from prism_challenge.chain.subtensor import ChainUnavailable


def wait_until(predicate, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


@pytest.fixture
def connections(fake, monkeypatch) -> list[FakeConnection]:
    """Each `bittensor.Subtensor` the client makes gets its own connection to the fake."""
    real = bittensor.Subtensor
    monkeypatch.setattr(bittensor, "Subtensor",
                        lambda network, substrate=None: real(network,
                                                             substrate=FakeConnection(fake)))
    return fake.connections


def test_a_reconnect_waits_for_the_calls_still_on_the_old_connection(
        client, fake, connections):
    c = client()
    assert c.block() == 1000
    fake.hold = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(c.block)  # another thread's read, in flight on connection 1
        wait_until(lambda: fake.holding == 1, "the read in flight")
        fake.raise_next = bittensor.RpcConnectionError("connection reset by peer")
        with pytest.raises(ChainUnavailable, match="connection reset by peer"):
            c.metagraph()  # this thread's call fails: the client drops connection 1
        time.sleep(0.2)
        assert not connections[0].closed  # still carrying the read in flight
        fake.block = 1001
        fake.hold.set()
        assert held.result(10) == 1001
    wait_until(lambda: connections[0].closed, "connection 1 closed once unused")
    assert c.block() == 1001 and c._client._substrate is connections[1]
    assert [x.closed for x in connections] == [True, False] and fake.leaked == 0


def test_concurrent_first_calls_open_one_connection(client, fake, connections):
    fake.connect_delay = 0.2
    c = client()
    with ThreadPoolExecutor(4) as pool:
        blocks = list(pool.map(lambda _: c.block(), range(4)))
    assert blocks == [1000] * 4
    assert [x.opened for x in connections] == [1] and fake.leaked == 0


def test_a_connection_opened_before_a_reconnect_is_closed_not_put_back(
        client, fake, connections):
    fake.connect_delay = 0.3
    c = client()
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(c.block)  # connecting on connection 1
        wait_until(lambda: connections[0].opened == 1, "the first connect")
        c._reconnect()  # meanwhile another thread's call failed: connection 1 is done with
        assert first.result(10) == 1000
    assert c.block() == 1000 and c._client._substrate is connections[1]
    wait_until(lambda: connections[0].closed, "connection 1 closed")
    assert [(x.opened, x.closed) for x in connections] == [(1, True), (1, False)]
    assert fake.leaked == 0
