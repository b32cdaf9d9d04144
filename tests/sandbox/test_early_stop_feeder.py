"""The feeder's early stop over the real socket protocol, with two ranks reporting their
losses at their own pace: a checkpoint is judged on the stretch whose losses have all
arrived, and once stopped every rank is told `done`."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from prism_challenge.data import TokenStream
from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.early_stop import EarlyStopPlan, LeaderCurve
from prism_challenge.sandbox.feeder import Feeder, FeederPlan

T, ROWS, PER_RANK = 32, 64, 4  # 8 steps of 2 x 4 rows; a checkpoint at row 16


def _rank(path, rank: int) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(path))
    for op in ("hello", "ready"):
        protocol.send(s, {"op": op, "rank": rank})
        protocol.recv(s)
    return s


def _ask(s, rank: int, step: int) -> None:
    protocol.send(s, {"op": "next", "rank": rank, "step": step, "rows": PER_RANK})


def _reply(s) -> dict:
    return protocol.recv(s)[0]


def _allocated(feeder, steps: int) -> None:
    """Wait until the feeder has allocated `steps` steps (it has taken the request)."""
    deadline = time.monotonic() + 10
    while len(feeder.state.steps) < steps:
        assert time.monotonic() < deadline, "the feeder never took the request"
        time.sleep(0.01)


def _loss(s, rank: int, step: int, nats: float) -> None:
    losses = np.full(PER_RANK * T, nats, dtype="<f4").tobytes()
    protocol.send(s, {"op": "loss", "rank": rank, "step": step}, losses)


def test_two_ranks_are_stopped_on_the_reported_stretch(prepared_data, tmp_path):
    train = TokenStream.open(prepared_data, "train")
    leader = LeaderCurve.from_batches([(i, 1, T * 2.0) for i in range(ROWS)], ROWS)
    early = EarlyStopPlan(target_bpb=0.5, leader=leader, leader_id=3, checkpoints=(16, 48),
                          max_gain=0.5, budget_bytes=ROWS * T * 4, recent_rows=4)
    plan = FeederPlan(seq_len=T, vocab_size=train.manifest.vocab_size,
                      separator_id=train.manifest.separator_id, param_cap=10**6,
                      token_budget=T * ROWS, budget_rows=ROWS, deadline_s=30.0, world_size=2,
                      sample_secret=b"s" * 32, keep_rate=0.05, lanes=16, early_stop=early)
    feeder = Feeder(train, plan, tmp_path / "feeder.sock")
    r0, r1 = _rank(feeder.path, 0), _rank(feeder.path, 1)
    try:
        # ranks are served in step: each rank's rows leave once both asked for that step
        for step in (0, 1):
            _ask(r0, 0, step)
            _ask(r1, 1, step)
            assert _reply(r0)["rows"] == _reply(r1)["rows"] == PER_RANK
            _loss(r0, 0, step, 30.0)  # a collapsed model: 30 nats a position
            if step == 0:
                _loss(r1, 1, step, 30.0)
        # row 16 is reached, but rank 1's rows 12-15 have no losses yet: not judged (step 2
        # is allocated when rank 0 asks, before rank 1's losses are sent)
        _ask(r0, 0, 2)
        _allocated(feeder, 3)
        _loss(r1, 1, 1, 30.0)
        _ask(r1, 1, 2)
        assert _reply(r0)["rows"] == _reply(r1)["rows"] == PER_RANK
        assert feeder.state.stopped is None
        _loss(r0, 0, 2, 30.0)
        _ask(r0, 0, 3)
        assert _reply(r0) == {"done": True}  # judged on rows 0-19, all reported
        _loss(r1, 1, 2, 30.0)
        _ask(r1, 1, 3)
        assert _reply(r1) == {"done": True}
    finally:
        r0.close()
        r1.close()
        feeder.close()
    stop = feeder.state.stopped
    assert (stop.checkpoint, stop.position, stop.stop) == (0, 20, True)
    judged = [b for b in feeder.reported() if b.position < 20]
    assert len(judged) == 5  # rows 0-19: rank 1's step-2 batch (20-23) came in later
    assert stop.run_bits == pytest.approx(30 * sum(b.tokens for b in judged) / np.log(2))
    assert stop.bound_bpb > early.target_bpb
    assert feeder.state.next_position == 24  # nothing served after the stop
