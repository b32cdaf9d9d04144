"""The eval sandbox's model keeper (`eval_main._Models`) over an architecture source, with
final weights saved beside it: for the rebuild tests on the CPU and on a GPU."""

from __future__ import annotations

from pathlib import Path

import torch

from prism_challenge.sandbox.harness.eval_main import _Models
from prism_challenge.sandbox.harness.loading import build_model, load_module

CFG = {"vocab_size": 64, "seq_len": 16, "param_cap": 10**6, "seed": 7}


def eval_models(folder: Path, source: bytes, *, fast: bool, device: str = "cpu") -> _Models:
    """Every task copied after the first full build (`fast`: the tiny models here build in
    milliseconds, so the threshold is lifted), or every task a full build (the reference).
    The final weights are another seed's build, so the trained model is not the twin."""
    folder.mkdir(parents=True, exist_ok=True)
    arch = folder / "architecture.py"
    arch.write_bytes(source)
    inputs = folder / "inputs"
    inputs.mkdir(exist_ok=True)
    trained = build_model(load_module(arch, "architecture"), seed=99, vocab_size=64,
                          seq_len=16, max_params=10**6)
    torch.save(torch.nn.Module.state_dict(trained), inputs / "final.pt")
    models = _Models(lambda: load_module(arch, "architecture"), CFG, inputs,
                     torch.device(device))
    models.COPY_ABOVE_S = 0.0
    if not fast:
        models._from_pristine = lambda: None
    return models
