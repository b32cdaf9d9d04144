"""The honest corpus: real bundles that must pass the AST policy and work as models."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gates_tiny_ctx import TinyCtx, load_script

from prism_challenge.gates import check_policy

HONEST = Path(__file__).resolve().parents[1] / "fixtures" / "honest"
NAMES = sorted(p.name for p in HONEST.iterdir() if p.is_dir())


def read_bundle(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}


def test_corpus_holds_the_families_and_training_styles():
    # Mixers: attention (with and without dropout), recurrent, convolution, MLP, routed
    # experts; training: fp32 and bf16 autocast, gradient accumulation, two passes a batch.
    assert NAMES == ["causal_conv", "gpt", "gpt_dropout", "grad_accum_bf16", "lstm",
                     "mlp_mixer", "moe"]


@pytest.mark.parametrize("name", NAMES)
def test_honest_bundle_is_tiny_at_the_demo_shape(name):
    """Well under a million numbers in the state dict at vocab 4096, seq_len 128, so that
    end-to-end sandbox runs of the corpus stay cheap on two CPU cores."""
    ctx = TinyCtx(vocab_size=4096, seq_len=128)
    model = load_script(HONEST / name / "architecture.py", "architecture").build_model(ctx)
    unique = {id(t): t.numel() for t in model.state_dict().values()}
    assert 50_000 < sum(unique.values()) < 700_000


@pytest.mark.parametrize("name", NAMES)
def test_honest_bundle_passes_the_policy(name):
    assert check_policy(read_bundle(HONEST / name)) == []


@pytest.mark.parametrize("name", NAMES)
def test_honest_bundle_builds_a_causal_model_and_trains(name):
    torch.manual_seed(0)
    ctx = TinyCtx()
    arch = load_script(HONEST / name / "architecture.py", "architecture")
    ctx.model = arch.build_model(ctx)
    assert isinstance(ctx.model, torch.nn.Module)

    x = torch.randint(0, ctx.vocab_size, (2, ctx.seq_len))

    def forward(tokens):  # the same RNG for every forward, as the causality probe does,
        torch.manual_seed(1)  # so that dropout masks match
        return ctx.model(tokens)

    logits = forward(x)
    assert logits.shape == (2, ctx.seq_len, ctx.vocab_size)
    assert torch.isfinite(logits).all()
    # Causal (in train mode, where dropout is on): changing the tokens after position t
    # leaves logits at <= t unchanged.
    assert ctx.model.training
    t = ctx.seq_len // 2
    y = x.clone()
    y[:, t + 1 :] = (y[:, t + 1 :] + 1) % ctx.vocab_size
    assert torch.allclose(forward(y)[:, : t + 1], logits[:, : t + 1], atol=1e-5)
    assert not torch.allclose(forward(y)[:, t + 1 :], logits[:, t + 1 :])

    before = [p.detach().clone() for p in ctx.model.parameters()]
    training = load_script(HONEST / name / "training.py", "training")
    training.train(ctx)
    assert ctx.exhausted and len(ctx.losses) >= 2  # the whole budget was consumed
    after = list(ctx.model.parameters())
    changed = sum(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert changed > 0
    assert all(torch.isfinite(p).all() for p in ctx.model.parameters())
