"""A held-out answer on the GPU does not depend on the rows beside it: the held-out recheck
(docs/scoring.md) answers rows again at their own place in a batch of the same shape, among
other rows, and fails a run whose nats move by more than `probe_abs_tol`, so an honest
model must give a row bit for bit the same logits whatever the other rows of its batch
hold, in fp32 and under bf16 autocast, on the attention kernels the GPU picks (flash,
memory-efficient, cuDNN). Checked on every honest bundle shipped."""

from __future__ import annotations

import pytest
import torch
from fixture_bundles import FIXTURES

from prism_challenge.sandbox.harness.loading import build_model, load_module
from prism_challenge.sandbox.harness.seeding import make_deterministic

ROOT = FIXTURES.parents[2]
BUNDLES = sorted([*ROOT.joinpath("examples").glob("*/architecture.py"),
                  *(FIXTURES.parent / "honest").glob("*/architecture.py")])


@pytest.mark.parametrize("dtype", [None, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("path", BUNDLES, ids=[p.parent.name for p in BUNDLES])
def test_a_rows_logits_are_the_same_beside_any_other_rows(path, dtype):
    make_deterministic(1, 4)
    arch = load_module(path, f"architecture_{path.parent.name}")
    model = build_model(arch, vocab_size=512, seq_len=128, max_params=10**9, seed=1).cuda()
    model.eval()
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randint(0, 512, (32, 128), generator=g) for _ in range(2))
    b[17] = a[17]
    with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float32,
                                         enabled=dtype is not None):
        la, lb = model(a.cuda()), model(b.cuda())
    assert torch.equal(la[17], lb[17])
