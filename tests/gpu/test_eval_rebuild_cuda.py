"""The eval sandbox's copied builds on a GPU: after one full build, every later task of the
trained model and the twin is built on the meta device, allocated on the GPU and filled from
the copy (the trained one then loads its final weights there). Its logits, CPU and CUDA RNG
state and next random draws must equal a full build's bit for bit, as on the CPU
(tests/sandbox/test_eval_rebuild.py)."""

from __future__ import annotations

import torch
from eval_kit import eval_models
from fixture_bundles import FIXTURES

from prism_challenge.sandbox.harness.eval_main import _Models

ORDER = ("trained",) * 3 + ("twin",) * 3 + ("trained",)


def _answers(models: _Models) -> list:
    x = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(3)).cuda()
    out = []
    for name in ORDER:
        model = models.get(name, None)
        out.append((model(x).detach().cpu(), torch.get_rng_state(),
                    torch.cuda.get_rng_state(0), torch.rand(2, device="cuda").cpu(),
                    models.built))
    return out


def test_copied_builds_on_the_gpu_match_full_builds_bit_for_bit(tmp_path):
    source = (FIXTURES / "tiny" / "architecture.py").read_bytes()
    got = _answers(eval_models(tmp_path / "fast", source, fast=True, device="cuda"))
    want = _answers(eval_models(tmp_path / "full", source, fast=False, device="cuda"))
    assert [g[-1] for g in got] == ["full"] + ["copy"] * (len(ORDER) - 1)
    for g, w in zip(got, want, strict=True):
        for a, b in zip(g[:-1], w[:-1], strict=True):
            assert torch.equal(a, b)
    assert not torch.equal(got[0][0], got[3][0])  # the trained model is not the twin
