"""The eval sandbox answers every held-out task from a fresh instance of the model: a fresh
exec of architecture.py and a new build. After the first full build the later ones are made
on the meta device and filled from a copy of it, and must be indistinguishable from a full
build: the same logits bit for bit, the same RNG state, a new object. A model keeping a
tensor outside its parameters and buffers is built in full every time."""

from __future__ import annotations

import pytest
import torch
from fixture_bundles import FIXTURES

from prism_challenge.sandbox.harness.eval_main import _Models
from prism_challenge.sandbox.harness.loading import build_model, load_module

CFG = {"vocab_size": 64, "seq_len": 16, "param_cap": 10**6, "seed": 7}
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


def _models(tmp_path, source: bytes, fast: bool) -> _Models:
    tmp_path.mkdir(parents=True, exist_ok=True)
    arch = tmp_path / "architecture.py"
    arch.write_bytes(source)
    inputs = tmp_path / "inputs"
    inputs.mkdir(exist_ok=True)
    trained = build_model(load_module(arch, "architecture"), seed=99, vocab_size=64,
                          seq_len=16, max_params=10**6)
    torch.save(torch.nn.Module.state_dict(trained), inputs / "final.pt")
    models = _Models(lambda: load_module(arch, "architecture"), CFG, inputs,
                     torch.device("cpu"))
    models.COPY_ABOVE_S = 0.0  # the tiny model builds in milliseconds: copy it anyway
    if not fast:  # the reference: every task a full build
        models._from_pristine = lambda name: None
    return models


def _answers(models: _Models, name: str, tasks: int = 3) -> list:
    x = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(3))
    out = []
    for _ in range(tasks):
        model = models.get(name, None)
        out.append((id(model), model(x).detach(), torch.get_rng_state(),
                    torch.rand(2)))  # the RNG the model's forward would draw from
    return out


def test_later_builds_match_a_full_build_bit_for_bit(tmp_path):
    source = (FIXTURES / "tiny" / "architecture.py").read_bytes()
    for name in ("trained", "twin"):
        fast = _models(tmp_path / f"fast-{name}", source, fast=True)
        full = _models(tmp_path / f"full-{name}", source, fast=False)
        got, want = _answers(fast, name), _answers(full, name)
        assert name in fast.pristine and not fast.full_only  # later tasks: from the copy
        for (_, logits, rng, draw), (_, logits_w, rng_w, draw_w) in zip(got, want,
                                                                        strict=True):
            assert torch.equal(logits, logits_w)
            assert torch.equal(rng, rng_w) and torch.equal(draw, draw_w)


@pytest.mark.parametrize("loose", [LOOSE, IN_GLOBAL], ids=["attribute", "global"])
def test_a_tensor_outside_parameters_and_buffers_means_full_builds(tmp_path, loose):
    source = (FIXTURES / "tiny" / "architecture.py").read_bytes() + loose
    fast = _models(tmp_path / "fast", source, fast=True)
    full = _models(tmp_path / "full", source, fast=False)
    got, want = _answers(fast, "twin"), _answers(full, "twin")
    # the meta build left a tensor without a value: full builds from then on
    assert "twin" not in fast.pristine and fast.full_only == {"twin"}
    for (_, logits, *_), (_, logits_w, *_) in zip(got, want, strict=True):
        assert torch.equal(logits, logits_w)



def test_a_model_that_builds_quickly_is_not_copied(tmp_path):
    models = _models(tmp_path, (FIXTURES / "tiny" / "architecture.py").read_bytes(), fast=True)
    models.COPY_ABOVE_S = 60.0  # no build takes this long: every task builds in full
    got = _answers(models, "trained")
    assert len(got) == 3 and models.pristine == {} and models.full_only == set()
