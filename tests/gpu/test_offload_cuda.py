"""On a real GPU, per-step losses and input-edit flags reach the host exactly, in step
order, through pinned memory; a backlog never grows past LAG steps."""

from __future__ import annotations

import torch

from prism_challenge.sandbox.harness.offload import LAG, Offload


def test_cuda_results_arrive_exactly_in_order_and_the_backlog_is_bounded():
    box, want, seen = Offload(), {}, []
    for step in range(20):
        per_token = torch.randn(64, 128, device="cuda") ** 2
        want[step] = per_token.cpu()
        edited = torch.tensor(step == 7, device="cuda")
        box.push(step, per_token, edited)
        seen += [(s, n.clone(), e) for s, n, e in box.due()]
        assert len(box) <= LAG
    seen += [(s, n.clone(), e) for s, n, e in box.due(everything=True)]
    assert [s for s, _, _ in seen] == list(range(20))
    assert [s for s, _, e in seen if e] == [7]
    assert all(torch.equal(n, want[s]) for s, n, _ in seen)
