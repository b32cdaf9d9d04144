"""Per-step results leave the device in step order, with their input-edit flags; on a GPU
without a host sync per step (tests/gpu/test_offload_cuda.py checks the CUDA path)."""

from __future__ import annotations

import torch

from prism_challenge.sandbox.harness.offload import LAG, Offload


def test_cpu_results_are_due_at_once_in_step_order():
    box = Offload()
    for step in range(3):
        box.push(step, torch.full((2, 3), float(step)), torch.tensor(step == 1))
    got = list(box.due())
    assert [s for s, _, _ in got] == [0, 1, 2]
    assert [e for _, _, e in got] == [False, True, False]
    assert got[2][1].tolist() == [[2.0] * 3] * 2
    assert len(box) == 0 and list(box.due(everything=True)) == []
    assert LAG >= 1
