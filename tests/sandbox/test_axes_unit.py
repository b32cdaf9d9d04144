"""Measured axes recorded by the harness (in-process: these are plain functions)."""

import pytest
import torch

from prism_challenge.sandbox.harness.axes import (
    ForwardTally,
    OptimizerWatch,
    layer_count,
    module_census,
    step_rows,
)


def test_lr_axis_is_the_peak_of_a_warmup_schedule():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 10))
    with OptimizerWatch() as watch:
        for _ in range(20):
            model(torch.ones(2, 4)).sum().backward()
            opt.step()
            sched.step()
    (entry,) = watch.optimizers()
    assert entry["cls"] == "AdamW"
    assert entry["hparams"]["lr"] == 2e-3
    assert entry["hparams"]["betas"] == [0.9, 0.95]
    assert entry["hparams"]["initial_lr"] == 2e-3


def test_hook_is_removed_on_exit():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with OptimizerWatch() as watch:
        pass
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    assert watch.optimizers() == []


def test_census_and_depth():
    blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
                                 for _ in range(3))
    model = torch.nn.Module()
    model.blocks = blocks
    model.head = torch.nn.Linear(2, 5)
    assert layer_count(model) == 3
    assert module_census(model) == {"Linear": 4, "ModuleList": 1, "ReLU": 3, "Sequential": 3}


def _steps(model, *opts, n=3):
    for _ in range(n):
        model(torch.ones(2, 4)).sum().backward()
        for opt in opts:
            opt.step()
        model.zero_grad()


def test_a_decoy_optimiser_stepped_first_is_not_recorded():
    """Muon-like decoys (a dummy tensor, or the model's parameters at lr 0) step before the
    real optimiser and change nothing the registry reads."""
    model = torch.nn.Linear(4, 4)
    dummy = torch.nn.Parameter(torch.zeros(3))
    dummy.grad = torch.ones(3)
    decoy = torch.optim.SGD([dummy], lr=0.5)
    frozen = torch.optim.SGD(model.parameters(), lr=0.0)
    real = torch.optim.AdamW(model.parameters(), lr=3e-3)
    with OptimizerWatch(model) as watch:
        _steps(model, decoy, frozen, real)
    (entry,) = watch.optimizers()
    assert entry["cls"] == "AdamW" and entry["hparams"]["lr"] == 3e-3
    assert entry["steps"] == 3 and entry["moved"] == 3 * 20


def test_optimisers_rank_by_how_far_they_moved_the_parameters():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    small = torch.optim.SGD(model[1].parameters(), lr=1e-3)  # 5 elements, stepped first
    big = torch.optim.AdamW(model[0].parameters(), lr=1e-1)  # 20 elements
    with OptimizerWatch(model) as watch:
        _steps(model, small, big, n=2)
    ranked = watch.optimizers()
    assert [(e["cls"], e["steps"], e["moved"]) for e in ranked] == [
        ("AdamW", 2, 40), ("SGD", 2, 10)]
    # AdamW's first steps move each element by about its lr: 2 steps x 20 elements x 0.1
    assert 2.0 < ranked[0]["update"] < 6.0 and 0 < ranked[1]["update"] < 0.1


class Muon(torch.optim.SGD):
    """A decoy named like a fashionable optimiser: it steps and changes nothing."""

    @torch.no_grad()
    def step(self, closure=None):
        return None


def test_a_decoy_built_and_stepped_first_on_the_same_parameters_does_not_take_the_axis():
    """Decoys constructed before the real optimiser and stepped before it on every step,
    over the very same parameters: one with a tiny lr, one that moves nothing at lr 0.5.
    Each could move as many elements as the real one; only AdamW moved them."""
    from prism_challenge.registry.axes import _first_optimizer
    from prism_challenge.sandbox.record import MeasuredAxes, OptimizerAxis

    model = torch.nn.Linear(4, 4)
    tiny = torch.optim.SGD(model.parameters(), lr=1e-9)
    muon = Muon(model.parameters(), lr=0.5)
    real = torch.optim.AdamW(model.parameters(), lr=3e-3)
    with OptimizerWatch(model) as watch:
        _steps(model, tiny, muon, real, n=4)
    ranked = watch.optimizers()
    assert [(e["cls"], e["moved"]) for e in ranked] == [("AdamW", 80), ("SGD", 80),
                                                        ("Muon", 80)]
    assert ranked[0]["hparams"]["lr"] == 3e-3 and ranked[0]["update"] > 0.05
    assert ranked[1]["update"] < 1e-6 and ranked[2]["update"] == 0.0
    axes = MeasuredAxes.model_construct(  # the registry does not trust the record's order
        optimizers=[OptimizerAxis.model_validate(e) for e in ranked[::-1]])
    assert _first_optimizer(axes).cls == "AdamW"


def test_a_step_without_gradients_moves_nothing():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with OptimizerWatch(model) as watch:
        opt.step()  # no backward yet: every grad is None
    assert watch.optimizers() == []


def test_precision_and_compile_follow_the_scored_rows():
    tally = ForwardTally()
    assert tally.axes() == {"precision": "fp32", "compile": False}  # an unused iterator
    tally.add(200, "bfloat16", True)  # one big compiled bf16 step...
    for _ in range(30):
        tally.add(16, "fp32", False)  # ...and the fp32 steps that carried the run
    assert tally.axes() == {"precision": "fp32", "compile": False}


def test_rows_per_step_is_the_row_weighted_median():
    assert step_rows([]) is None
    assert step_rows([16] * 10) == 16
    assert step_rows([1] * 100 + [255] * 4) == 255  # 920 of 1120 rows went in 255-row steps
    assert step_rows([1] * 1000 + [200]) == 1


def test_the_sampled_update_is_exact_when_every_element_moves_alike():
    """SGD with a constant gradient moves each of 4,160 elements by exactly lr per step: the
    estimate (every step of the first ALWAYS, then one step in EVERY weighted EVERY, a few
    parameters and elements each) must give the true L1 sum, 40 x 4,160 x 0.1."""
    from prism_challenge.sandbox.harness.axes import ALWAYS, EVERY

    steps = ALWAYS + 4 * EVERY
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with OptimizerWatch(model) as watch:
        for _ in range(steps):
            for p in model.parameters():
                p.grad = torch.ones_like(p)
            opt.step()
    (entry,) = watch.optimizers()
    assert entry["steps"] == steps and entry["moved"] == steps * 4160
    assert entry["update"] == pytest.approx(steps * 4160 * 0.1, rel=1e-4)
