"""A replay meets the plan it is given (the verification's stored draw, so every retry on any
node meets the same checks), and a crash that prints a host fault is the miner's: only the
host's own evidence (kernel Xids, a failing health probe) makes a run or a replay
infrastructure."""

from __future__ import annotations

import numpy as np
import pytest
from sandbox_kit import bundle

from prism_challenge.isolation.spec import SandboxResult
from prism_challenge.sandbox.runner import _exit_of
from prism_challenge.verification.replay import DrawnPlan, choose_checks, draw_plan
from prism_challenge.verification.verdict import verdict

ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"


def test_a_fake_host_fault_in_a_replay_neither_rerolls_nor_counts_as_infra(tiny_run, runner,
                                                                          tmp_path):
    _, record, _ = tiny_run
    drawn = draw_plan(record, snapshots=runner.settings.verification.snapshot_steps)
    first = choose_checks(record, drawn)
    cols = record.columns
    held = set(cols.step[cols.held()].tolist())
    assert first.probe_steps | first.snapshot_steps == held  # every kept position is checked
    assert first.snapshot_steps == set(drawn.snapshot_steps) and len(drawn.snapshot_steps) > 0
    with pytest.raises(ValueError, match="belongs to another run"):
        choose_checks(record, DrawnPlan(snapshot_steps=[max(held) + 1]))
    # the replay's model raises a driver's text on its third step
    replay = runner.replay(bundle("fakefault", AT="3"), record, tmp_path / "replay",
                           plan=drawn)
    assert replay.exit_reason == "crash" and "ECC" in replay.exit_detail
    assert (set(replay.probe_steps), set(replay.snapshot_steps)) == (
        set(first.probe_steps), set(first.snapshot_steps))
    result = verdict(replay, runner.settings.verification)  # a verdict, not a retry
    assert not result.passed
    assert any("the replay stopped at step" in r for r in result.reasons), result.reasons


@pytest.mark.parametrize("where", ["output", "detail"])
def test_a_crash_is_the_miners_whatever_driver_error_it_prints(feeder, where):
    feeder.state.claimed.add(0)  # the harness said hello: the miner's code was running
    output = ECC if where == "output" else "Traceback ..."
    if where == "detail":
        feeder.state.finishes[0] = _finish(ECC)
    result = SandboxResult(cause="crash", exit_code=1, wall_s=1.0, output=output,
                           output_bytes_total=len(output))
    reason, detail = _exit_of(result, feeder)
    assert reason == "crash" and "ECC" in detail


@pytest.mark.parametrize("cause", ["crash", "timeout", "memory"])
def test_a_sandbox_that_ends_before_any_hello_is_infra(feeder, cause):
    """No rank said hello: the harness (or the interpreter, torch, the environment) failed
    before any of the miner's code was imported, so the run is not the miner's."""
    output = "ImportError: libcudart.so.12: cannot open shared object file"
    result = SandboxResult(cause=cause, exit_code=1, wall_s=1.0, output=output,
                           output_bytes_total=len(output), detail=f"{cause} detail")
    reason, detail = _exit_of(result, feeder)
    assert reason == "infra"
    assert "none of the miner's code had run" in detail and "libcudart" in detail
    feeder.state.claimed.add(0)  # the same end after a hello is the miner's
    assert _exit_of(result, feeder)[0] == {"crash": "crash", "timeout": "deadline",
                                           "memory": "memory"}[cause]


def _finish(detail: str):
    from prism_challenge.sandbox.feeder import Finish

    return Finish("crash", detail, None, [])


def test_kept_positions_are_per_stream_position_whatever_the_batching():
    from prism_challenge.sandbox.sampling import kept_counts, kept_positions

    secret = b"k" * 32
    whole = kept_counts(secret, 0, 600, 64, 0.01)
    # the same stream cut into 1-row, 7-row and 255-row batches keeps the same positions
    for size in (1, 7, 255):
        parts = [kept_counts(secret, s, min(size, 600 - s), 64, 0.01)
                 for s in range(0, 600, size)]
        assert np.array_equal(np.concatenate(parts), whole)
    rows, pos = kept_positions(secret, 100, 50, 64, 0.01)
    assert np.array_equal(np.bincount(rows, minlength=50), whole[100:150])
    assert ((0 <= pos) & (pos < 64)).all()
    # the chance is the same for every position: ~0.01 of 600 * 64 kept
    assert 250 <= whole.sum() <= 520
