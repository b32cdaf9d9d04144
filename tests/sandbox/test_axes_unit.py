"""Measured axes recorded by the harness (in-process: these are plain functions)."""

import torch

from prism_challenge.sandbox.harness.axes import OptimizerWatch, layer_count, module_census


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
