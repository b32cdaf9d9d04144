"""The task process's kernel warm-up is harness code on constant inputs: it draws nothing
from the RNG streams a task may read, and leaves the thread's modes as it found them, so a
task answers as it would without it (on a GPU the held-out figures are compared with it on
and off: tests/gpu/test_eval_task_processes_cuda.py)."""

from __future__ import annotations

import pytest
import torch

from prism_challenge.sandbox.harness.warm_kernels import warm_kernels


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_the_warm_up_draws_nothing_random_and_leaves_the_modes(dtype):
    torch.manual_seed(7)
    before = torch.get_rng_state().clone()
    grad, autocast = torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")
    warm_kernels(torch.device("cpu"), dtype, seq_len=64, vocab_size=300)
    assert torch.equal(torch.get_rng_state(), before)
    assert (torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")) == (grad, autocast)
    expected = torch.rand(3)  # the stream goes on exactly where it was
    torch.manual_seed(7)
    assert torch.equal(torch.rand(3), expected)


def test_any_shape_of_the_run_is_warmed_without_error():
    for seq_len, vocab in ((1, 2), (7, 50_257), (4096, 8192)):
        warm_kernels(torch.device("cpu"), None, seq_len=seq_len, vocab_size=vocab)
