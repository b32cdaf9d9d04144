"""CUDA started before the miner's code is the framework's doing (infra), and cuDNN's version,
which cannot be read without starting CUDA, completes the run's stack at the ready: a replay
on another cuDNN is not comparable from there. The feeder is real; the hellos are what the
harness sends on a GPU host (on an H100, reading cuDNN's version at the hello started CUDA
and every honest run was refused as "used CUDA while its model was built")."""

from __future__ import annotations

import socket

from runner_kit import small_feeder

from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.feeder import ReplayPlan
from prism_challenge.sandbox.stack import Stack

STACK = {"torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": None, "cpu_capability": "AVX512",
         "deterministic": True, "start": "prewarmed"}


def _connect(feeder) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(feeder.path))
    return s


def _closed(sock) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionError, TimeoutError):
        return True


def test_cuda_started_before_the_miners_code_is_infra(feeder):
    s = _connect(feeder)
    protocol.send(s, {"op": "hello", "rank": 0, "cuda_devices": 1, "stack": STACK,
                      "cuda_started": "seeding.py:102 software_stack <- train_main.py:81"})
    assert _closed(s)
    assert feeder.state.infra_error.startswith(
        "CUDA was started in rank 0 before any of the miner's code ran (seeding.py:102")


def test_cudnn_arrives_with_the_ready_once_and_completes_the_stack(feeder):
    s = _connect(feeder)
    protocol.send(s, {"op": "hello", "rank": 0, "cuda_started": "", "stack": STACK})
    reply, _ = protocol.recv(s)  # a hello that started nothing is served
    assert reply["seq_len"] == 32 and feeder.state.infra_error is None
    assert feeder.state.stack.cudnn is None
    protocol.send(s, {"op": "ready", "rank": 0, "cudnn": 91900})
    protocol.recv(s)
    assert feeder.state.stack == Stack(**{**STACK, "cudnn": 91900})
    protocol.send(s, {"op": "ready", "rank": 0, "cudnn": 1})  # a second one changes nothing
    protocol.recv(s)
    assert feeder.state.stack.cudnn == 91900
    s.close()


def test_a_replay_on_another_cudnn_is_not_comparable_at_the_ready(prepared_data, tmp_path):
    original = Stack(**{**STACK, "cudnn": 91300})
    replay = ReplayPlan(original={}, probe_steps=frozenset(), snapshot_steps=frozenset(),
                        stack=original)
    from prism_challenge.sandbox.feeder import Feeder

    base = small_feeder(prepared_data, tmp_path / "base.sock")
    base.close()
    feeder = Feeder(base.stream, base.plan, tmp_path / "f.sock", replay=replay)
    try:
        s = _connect(feeder)
        protocol.send(s, {"op": "hello", "rank": 0, "stack": STACK})
        protocol.recv(s)  # the hello knows no cuDNN: the rest is the same stack
        assert feeder.state.incomparable is None
        protocol.send(s, {"op": "ready", "rank": 0, "cudnn": 91900})
        assert _closed(s)
        assert "cudnn 91300 -> 91900" in feeder.state.incomparable
        assert feeder.state.infra_error.startswith("not comparable")
    finally:
        feeder.close()
