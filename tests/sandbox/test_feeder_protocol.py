"""The feeder bounds every message before reading it (docs/security.md C2): a harness that
announces a huge payload is cut off without the validator reading (or holding) it."""

from __future__ import annotations

import json
import socket
import struct
import time

import numpy as np
import pytest
from runner_kit import small_feeder

from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.feeder import MAX_FINISH_BYTES
from prism_challenge.sandbox.sampling import kept_positions


def _client(feeder) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(feeder.path))
    protocol.send(s, {"op": "hello", "rank": 0})
    protocol.recv(s)
    return s


def _announce(sock, header: dict) -> None:
    raw = json.dumps(header).encode()
    sock.sendall(struct.pack(">I", len(raw)) + raw)  # the payload itself never follows


def _closed(sock) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionError, TimeoutError):
        return True


def test_an_oversized_finish_is_refused_before_it_is_read(feeder):
    s = _client(feeder)
    t0 = time.monotonic()
    _announce(s, {"op": "finish", "rank": 0, "status": "ok", "payload": 512 * 2**20})
    assert _closed(s) and time.monotonic() - t0 < 5
    assert any("over its limit" in p and str(MAX_FINISH_BYTES) in p
               for p in feeder.state.problems)
    assert feeder.state.finishes == {}


def test_losses_must_be_exactly_one_float_per_served_position(feeder):
    s = _client(feeder)
    protocol.send(s, {"op": "ready", "rank": 0})
    protocol.recv(s)
    protocol.send(s, {"op": "next", "rank": 0, "step": 0, "rows": 4})
    reply, rows = protocol.recv(s)
    assert reply["rows"] == 4 and len(rows) == 4 * 33 * 4
    _announce(s, {"op": "loss", "rank": 0, "step": 0, "payload": 4 * 32 * 4 + 4})
    assert _closed(s)
    assert any("'loss' payload" in p for p in feeder.state.problems)
    assert feeder.reported() == []


def test_losses_are_summed_by_the_feeder_over_scored_targets_only(feeder):
    s = _client(feeder)
    protocol.send(s, {"op": "ready", "rank": 0})
    protocol.recv(s)
    protocol.send(s, {"op": "next", "rank": 0, "step": 0, "rows": 4})
    reply, payload = protocol.recv(s)
    rows = np.frombuffer(payload, dtype="<i4").reshape(4, 33)
    losses = np.full((4, 32), 2.0, dtype="<f4")
    losses[:, ::2] = 3.0  # kept losses are read at their own positions
    protocol.send(s, {"op": "loss", "rank": 0, "step": 0}, losses.tobytes())
    protocol.send(s, {"op": "next", "rank": 0, "step": 1, "rows": 4})
    protocol.recv(s)
    [served] = feeder.reported()
    scored = rows[:, 1:] != feeder.plan.separator_id
    assert served.tokens == reply["tokens"] == int(scored.sum())
    assert served.nats == pytest.approx(float(losses[scored].sum()))
    kept_rows, kept_pos = kept_positions(feeder.plan.sample_secret, served.position, 4, 32,
                                         feeder.plan.keep_rate)
    assert len(kept_rows) >= 1
    assert served.sample == [3.0 if p % 2 == 0 else 2.0 for p in kept_pos.tolist()]


def test_ranks_are_served_in_step(prepared_data, tmp_path):
    """A rank's rows of step s leave only once every other rank still in the run has asked
    for step s: a rank cannot run ahead, fetch later rows of the stream (another rank's
    continuation of its documents) and hand them over before that rank's scored forward. A
    rank that finished holds no one back."""
    feeder = small_feeder(prepared_data, tmp_path / "feeder.sock", world_size=2)
    try:
        ranks = []
        for rank in (0, 1):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(str(feeder.path))
            protocol.send(s, {"op": "hello", "rank": rank})
            protocol.recv(s)
            protocol.send(s, {"op": "ready", "rank": rank})
            protocol.recv(s)
            ranks.append(s)
        zero, one = ranks

        def waiting(sock) -> bool:
            sock.settimeout(0.6)
            try:
                sock.recv(1, socket.MSG_PEEK)
            except TimeoutError:
                return True
            finally:
                sock.settimeout(10)
            return False

        protocol.send(one, {"op": "next", "rank": 1, "step": 0, "rows": 2})
        assert waiting(one)  # rank 0 has not asked for step 0 yet
        protocol.send(zero, {"op": "next", "rank": 0, "step": 0, "rows": 2})
        assert protocol.recv(zero)[0]["rows"] == 2 and protocol.recv(one)[0]["rows"] == 2
        protocol.send(one, {"op": "next", "rank": 1, "step": 1, "rows": 2})
        assert waiting(one)  # rank 1 runs ahead: held until rank 0 asks for step 1
        protocol.send(zero, {"op": "finish", "rank": 0, "status": "ok", "detail": ""},
                      json.dumps({}).encode())
        protocol.recv(zero)
        assert protocol.recv(one)[0]["rows"] == 2  # rank 0 is done: no longer waited for
    finally:
        feeder.close()


def test_rows_arrive_in_the_buffer_they_were_received_into(feeder):
    """The harness gets a step's rows in the very buffer the socket filled, not a copy of it
    whose freed original (targets included) a forward could find in recycled memory."""
    s = _client(feeder)
    protocol.send(s, {"op": "ready", "rank": 0})
    protocol.recv(s)
    protocol.send(s, {"op": "next", "rank": 0, "step": 0, "rows": 4})
    reply, rows = protocol.recv(s)
    assert type(rows) is bytearray and len(rows) == reply["rows"] * 33 * 4


def test_probe_losses_come_as_a_payload_only_where_a_probe_was_asked(feeder):
    """A probe's losses travel as float64s in the payload (a header could not carry a step
    of thousands of kept positions); a step no probe was asked for takes none."""
    s = _client(feeder)
    protocol.send(s, {"op": "ready", "rank": 0})
    protocol.recv(s)
    protocol.send(s, {"op": "next", "rank": 0, "step": 0, "rows": 4})
    reply, _ = protocol.recv(s)
    assert "probe" not in reply  # not a replay: nothing asked
    _announce(s, {"op": "probe", "rank": 0, "step": 0, "payload": 8})
    assert _closed(s)
    assert any("'probe' payload of 8 bytes is over its limit of 0" in p
               for p in feeder.state.problems)


def test_a_replay_deadline_moves_out_by_the_probes_own_time_up_to_its_allowance(
        prepared_data, tmp_path):
    """A probed step's forwards are the check's cost, not the run's: rank 0's time from its
    rows to its probe answer moves the deadline out, at most `probe_allowance_s` in all, so
    an honest run that used most of its deadline still reaches its checks."""
    import dataclasses

    from prism_challenge.sandbox.feeder import Feeder, ReplayPlan

    base = small_feeder(prepared_data, tmp_path / "base.sock")
    base.close()
    plan = dataclasses.replace(base.plan, keep_rate=1.0, probe_allowance_s=0.5)
    replay = ReplayPlan(original={(0, 0): (4, 0.0), (1, 0): (4, 0.0)},
                        probe_steps=frozenset({0, 1}), snapshot_steps=frozenset())
    feeder = Feeder(base.stream, plan, tmp_path / "feeder.sock", replay=replay)
    try:
        s = _client(feeder)
        protocol.send(s, {"op": "ready", "rank": 0})
        protocol.recv(s)
        start = feeder.state.deadline_at
        for step, pause in ((0, 0.3), (1, 0.6)):
            protocol.send(s, {"op": "next", "rank": 0, "step": step, "rows": 4})
            reply, _ = protocol.recv(s)
            asked = len(reply["probe"]["rows"])
            time.sleep(pause)
            protocol.send(s, {"op": "probe", "rank": 0, "step": step},
                          np.zeros(asked, "<f8").tobytes())
            protocol.send(s, {"op": "ready", "rank": 0})  # a round trip: the probe is in
            protocol.recv(s)
            moved = feeder.state.deadline_at - start
            if step == 0:
                assert 0.3 <= moved <= 0.5  # at least the pause, never past the cap
        assert moved == pytest.approx(0.5) and feeder.state.probe_extension_s == moved
        assert feeder.state.problems == []
    finally:
        feeder.close()


def _snapshot_feeder(prepared_data, tmp_path, snapshot_bytes: int):
    """A replay feeder that asks for a snapshot at step 0, writing snapshots to a host
    folder of its own."""
    import dataclasses

    from prism_challenge.sandbox.feeder import Feeder, ReplayPlan

    base = small_feeder(prepared_data, tmp_path / "base.sock")
    base.close()
    plan = dataclasses.replace(base.plan, snapshot_bytes=snapshot_bytes)
    replay = ReplayPlan(original={(0, 0): (4, 0.0), (1, 0): (4, 0.0)},
                        probe_steps=frozenset(), snapshot_steps=frozenset({0, 1}))
    (tmp_path / "host").mkdir()
    return Feeder(base.stream, plan, tmp_path / "feeder.sock", replay=replay,
                  snapshot_dir=tmp_path / "host")


def test_a_snapshot_is_written_outside_as_its_frames_arrive_and_counts_once_ended(
        prepared_data, tmp_path):
    """A replay's snapshot arrives in frames before the step's forward and is written into
    the feeder's host folder; it counts only once its last frame came, and a frame after
    that, or for a step not snapshotted, is refused as the run's fault."""
    feeder = _snapshot_feeder(prepared_data, tmp_path, 1 << 20)
    try:
        s = _client(feeder)
        protocol.send(s, {"op": "ready", "rank": 0})
        protocol.recv(s)
        protocol.send(s, {"op": "next", "rank": 0, "step": 0, "rows": 4})
        reply, _ = protocol.recv(s)
        assert reply["snapshot"] is True
        protocol.send(s, {"op": "snapshot", "rank": 0, "step": 0, "end": False}, b"abc" * 100)
        protocol.send(s, {"op": "ready", "rank": 0})  # a round trip: the frame is in
        protocol.recv(s)
        served = feeder.state.served[(0, 0)]
        assert served.snapshot is None and served.snapshot_received == 300
        protocol.send(s, {"op": "snapshot", "rank": 0, "step": 0, "end": True}, b"xyz")
        protocol.send(s, {"op": "ready", "rank": 0})
        protocol.recv(s)
        assert served.snapshot == tmp_path / "host" / "step_00000000_rank0.pt"
        assert served.snapshot.read_bytes() == b"abc" * 100 + b"xyz"
        assert feeder.state.snapshot_bytes == 303 and feeder.state.problems == []
        protocol.send(s, {"op": "snapshot", "rank": 0, "step": 0, "end": True})
        assert "error" in protocol.recv(s)[0]  # after its end: refused
        _announce(s, {"op": "snapshot", "rank": 0, "step": 0, "end": True, "payload": 1})
        assert _closed(s)
        assert served.snapshot.read_bytes() == b"abc" * 100 + b"xyz"
        assert any("'snapshot' payload of 1 bytes is over its limit of 0" in p
                   for p in feeder.state.problems)
    finally:
        feeder.close()


def test_snapshots_past_the_runs_bound_are_refused_before_they_are_read(
        prepared_data, tmp_path):
    feeder = _snapshot_feeder(prepared_data, tmp_path, 1000)
    try:
        s = _client(feeder)
        protocol.send(s, {"op": "ready", "rank": 0})
        protocol.recv(s)
        protocol.send(s, {"op": "next", "rank": 0, "step": 0, "rows": 4})
        protocol.recv(s)
        protocol.send(s, {"op": "snapshot", "rank": 0, "step": 0, "end": False}, b"a" * 600)
        _announce(s, {"op": "snapshot", "rank": 0, "step": 0, "end": True, "payload": 401})
        assert _closed(s)
        assert any("over its limit of 400" in p for p in feeder.state.problems)
        assert feeder.state.served[(0, 0)].snapshot is None
    finally:
        feeder.close()


def test_a_snapshot_cut_off_mid_stream_is_removed_when_the_run_ends(prepared_data, tmp_path):
    """A rank that stopped between two frames (crashed, killed) leaves part of a snapshot in
    the host folder: it was never handed to the eval, and the feeder removes it at the end;
    an ended snapshot stays for the eval."""
    feeder = _snapshot_feeder(prepared_data, tmp_path, 1 << 20)
    host = tmp_path / "host"
    try:
        s = _client(feeder)
        protocol.send(s, {"op": "ready", "rank": 0})
        protocol.recv(s)
        for step in (0, 1):
            protocol.send(s, {"op": "next", "rank": 0, "step": step, "rows": 4})
            protocol.recv(s)
            protocol.send(s, {"op": "snapshot", "rank": 0, "step": step, "end": step == 0},
                          b"frame")
        protocol.send(s, {"op": "ready", "rank": 0})  # a round trip: the frames are in
        protocol.recv(s)
        assert sorted(p.name for p in host.iterdir()) == ["step_00000000_rank0.pt",
                                                           "step_00000001_rank0.pt"]
        s.close()
    finally:
        feeder.close()
    assert [p.name for p in host.iterdir()] == ["step_00000000_rank0.pt"]
    assert feeder.state.served[(0, 0)].snapshot == host / "step_00000000_rank0.pt"
