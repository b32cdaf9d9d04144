"""Measured axes recorded by the harness (in-process: these are plain functions)."""

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


def test_optimisers_rank_by_the_parameter_elements_they_moved():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    small = torch.optim.SGD(model[1].parameters(), lr=0.1)  # 5 elements, stepped first
    big = torch.optim.AdamW(model[0].parameters(), lr=1e-3)  # 20 elements
    with OptimizerWatch(model) as watch:
        _steps(model, small, big, n=2)
    assert [(e["cls"], e["steps"], e["moved"]) for e in watch.optimizers()] == [
        ("AdamW", 2, 40), ("SGD", 2, 10)]


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
