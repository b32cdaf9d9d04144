"""The eval sandbox answers every held-out task from a fresh instance of the model: a fresh
exec of architecture.py and a new build. After the first full build (of the trained model
or the twin: the same build until the final weights load) the later ones of both are made
on the meta device, with no initialiser run, and filled from a copy of it; they must be
indistinguishable from a full build: the same logits bit for bit, the same RNG state, a new
object. A model keeping a tensor outside its parameters and buffers is built in full every
time."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from eval_kit import eval_models as _models
from fixture_bundles import FIXTURES

from prism_challenge.sandbox.harness.eval_main import _Models
from prism_challenge.sandbox.harness.loading import _no_values

LOOSE = b'''
class Loose(Tiny):
    def __init__(self, vocab_size):
        super().__init__(vocab_size)
        self.scale = [torch.rand(1)]  # a tensor outside the parameters and buffers

    def forward(self, input_ids):
        return super().forward(input_ids) * self.scale[0]


def build_model(ctx):
    return Loose(ctx.vocab_size)
'''
# the same, held in a list that architecture.py made before the build (so older than it)
IN_GLOBAL = b'''
_SCALES = []


class Loose(Tiny):
    def __init__(self, vocab_size):
        super().__init__(vocab_size)
        _SCALES.append(torch.rand(1))

    def forward(self, input_ids):
        return super().forward(input_ids) * _SCALES[-1]


def build_model(ctx):
    return Loose(ctx.vocab_size)
'''


def _answers(models: _Models, names, tasks: int = 3) -> list:
    x = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(3))
    out = []
    for name in [names] * tasks if isinstance(names, str) else names:
        model = models.get(name, None)
        out.append((id(model), model(x).detach(), torch.get_rng_state(),
                    torch.rand(2), models.built))  # the RNG the model's forward draws from
    return out


@pytest.mark.parametrize("names", ["trained", "twin", ("trained",) * 3 + ("twin",) * 3],
                         ids=["trained", "twin", "trained-then-twin"])
def test_later_builds_match_a_full_build_bit_for_bit(tmp_path, names):
    source = (FIXTURES / "tiny" / "architecture.py").read_bytes()
    fast = _models(tmp_path / "fast", source, fast=True)
    full = _models(tmp_path / "full", source, fast=False)
    got, want = _answers(fast, names), _answers(full, names)
    # one full build in all, even for the twin after the trained model: the rest are copies
    assert [g[-1] for g in got] == ["full"] + ["copy"] * (len(got) - 1)
    assert [w[-1] for w in want] == ["full"] * len(want)
    assert fast.pristine is not None and not fast.copy_off
    for (_, logits, rng, draw, _), (_, logits_w, rng_w, draw_w, _) in zip(got, want,
                                                                          strict=True):
        assert torch.equal(logits, logits_w)
        assert torch.equal(rng, rng_w) and torch.equal(draw, draw_w)
    if not isinstance(names, str):  # the trained model's answers are not the twin's
        assert not torch.equal(got[0][1], got[-1][1])


@pytest.mark.parametrize("loose", [LOOSE, IN_GLOBAL], ids=["attribute", "global"])
def test_a_tensor_outside_parameters_and_buffers_means_full_builds(tmp_path, loose):
    source = (FIXTURES / "tiny" / "architecture.py").read_bytes() + loose
    fast = _models(tmp_path / "fast", source, fast=True)
    full = _models(tmp_path / "full", source, fast=False)
    got, want = _answers(fast, "twin"), _answers(full, "twin")
    # the meta build left a tensor without a value: full builds from then on
    assert fast.pristine is None and fast.copy_off
    assert [g[-1] for g in got] == ["full"] * 3
    for (_, logits, *_), (_, logits_w, *_) in zip(got, want, strict=True):
        assert torch.equal(logits, logits_w)



def test_a_model_that_builds_quickly_is_not_copied(tmp_path):
    models = _models(tmp_path, (FIXTURES / "tiny" / "architecture.py").read_bytes(), fast=True)
    models.COPY_ABOVE_S = 60.0  # no build takes this long: every task builds in full
    got = _answers(models, "trained")
    assert [g[-1] for g in got] == ["full"] * 3
    assert models.pristine is None and not models.copy_off


def test_a_meta_build_runs_no_initialiser_and_keeps_every_shape():
    with torch.device("meta"), _no_values():
        w = torch.empty(3, 4)
        assert torch.nn.init.trunc_normal_(w, std=0.02) is w  # skipped: nothing to compute
        assert w.normal_().mul_(2).add_(1) is w
        b = torch.empty(4)
        b.unsqueeze_(0)  # an in-place op that changes the shape still runs
        assert b.shape == (1, 4) and w.shape == (3, 4) and w.is_meta
    with _no_values():  # a real tensor gets its values
        r = torch.zeros(2).fill_(5.0)
    assert r.tolist() == [5.0, 5.0]


def test_a_meta_build_imports_nothing_a_cpu_build_would_not():
    """On the meta device torch runs `normal_` through Python decompositions that import
    torch._dynamo (about 2 s) the first time: skipped initialisers never reach them."""
    program = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from prism_challenge.sandbox.harness.loading import build_model, load_module
        arch = load_module(Path({str(FIXTURES / "tiny" / "architecture.py")!r}), "architecture")
        build_model(arch, vocab_size=64, seq_len=16, max_params=10**6, seed=1, device="meta")
        print("torch._dynamo" in sys.modules, "sympy" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "False False"
