"""The harness's account of its host time per step: where a harness step loses to a bare
loop (read by benchmarks/harness_overhead.py and gpu_host.py, never scored)."""

from __future__ import annotations

import json

from prism_challenge.sandbox.harness.step_clock import SEGMENTS, WARMUP, StepClock


def test_each_segment_gets_the_time_since_the_last_mark_after_the_warm_up(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("prism_challenge.sandbox.harness.step_clock.time.perf_counter",
                        lambda: now[0])
    clock = StepClock()
    cost = {"rows": 0.004, "prepare": 0.001, "forward": 0.002, "loss": 0.0005,
            "miner": 0.010}
    for _ in range(WARMUP + 10):
        for segment in ("rows", "prepare", "forward", "loss", "miner"):
            now[0] += cost[segment]
            clock.mark(segment)
    got = clock.summary()
    assert got["steps"] == 10
    assert got["ms_per_step"] == {k: round(cost[k] * 1e3, 4) for k in SEGMENTS}


def test_a_run_writes_its_profile_where_the_benchmarks_read_it(tiny_run):
    _, record, folder = tiny_run
    got = json.loads((folder / "scratch" / "step_profile_rank0.json").read_text())
    assert got["steps"] == record.summary.count - WARMUP
    ms = got["ms_per_step"]
    assert set(ms) == set(SEGMENTS) and all(v >= 0 for v in ms.values())
    assert ms["forward"] > 0 and ms["miner"] > 0  # the tiny bundle forwards and steps
