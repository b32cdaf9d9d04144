"""The state contract's watch, in process: what counts as state outside parameters and
buffers, and what does not (torch's own module fields, buffers, constants)."""

from __future__ import annotations

import types

import torch

from prism_challenge.sandbox.harness.state_contract import CHECKED_STEPS, StateWatch


class Counting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.calls = 0
        self.register_buffer("seen", torch.zeros(()))
        self.width = 2  # a constant: never a finding

    def forward(self, x):
        self.calls += 1
        self.seen += 1  # a buffer: restored by the state_dict, fine
        return self.lin(x)


def _run(model, module=None, steps=CHECKED_STEPS + 2) -> list[str]:
    watch = StateWatch(model, module)
    for step in range(steps):
        watch.before_forward(step)
        model.train(step % 2 == 0)  # torch's own `training` flag flips: not a finding
        model(torch.ones(1, 2))
    return watch.notes


def test_a_python_counter_is_named_with_its_values():
    (note,) = _run(Counting())
    assert note == "Counting.calls changed from 0 to 1 between scored steps 0 and 1"


def test_a_global_of_the_architecture_is_named():
    arch = types.ModuleType("architecture")
    arch.HISTORY = []

    class Logging(torch.nn.Linear):
        def forward(self, x):
            arch.HISTORY.append(float(x.sum()))
            return super().forward(x)

    (note,) = _run(Logging(2, 2), arch)
    assert note == ("global HISTORY of architecture.py changed from [] to [2.0] between "
                    "scored steps 0 and 1")


def test_parameters_buffers_and_constants_are_no_finding():
    model = Counting()
    model.forward = types.MethodType(lambda self, x: self.lin(x) + self.seen.add_(1), model)
    assert _run(model) == []
