"""`ctx` as the first parameter of a torch.autograd.Function's methods is torch's per-call
FunctionCtx: assigning its attributes is allowed, while the harness's ctx stays protected
(in the policy and, for a harness ctx handed to such a method, at run time)."""

from __future__ import annotations

import textwrap

import pytest

from prism_challenge.gates import check_policy
from prism_challenge.gates.rules import ATTR_ASSIGN
from prism_challenge.sandbox.harness.context import TrainContext
from prism_challenge.sandbox.harness.loading import ContractError

ARCH = "import torch\n\n\ndef build_model(ctx):\n    return torch.nn.Linear(4, ctx.vocab_size)\n"
TRAIN = "def train(ctx):\n    for batch in ctx.batches(4):\n        batch.loss.backward()\n"

SCALE = '''
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        ctx.save_for_backward(x)
        return x * alpha

    @staticmethod
    def backward(ctx, grad):
        del ctx.alpha
        return grad, None
'''


def _rules(arch_extra: str = "", train_extra: str = "") -> list[str]:
    files = {"architecture.py": ARCH + textwrap.dedent(arch_extra),
             "training.py": "import torch\n\n\n" + textwrap.dedent(train_extra) + TRAIN}
    return sorted(v.rule for v in check_policy(files))


def test_an_autograd_function_may_set_attributes_on_its_ctx():
    assert _rules(SCALE) == []
    imported = SCALE.replace("torch.autograd.Function", "Function")
    assert _rules("from torch.autograd import Function\n" + imported) == []


@pytest.mark.parametrize("body", [
    # the harness's ctx, or a ctx parameter that is not torch's FunctionCtx
    "def train_helper(ctx):\n    ctx.batches = None\n",
    "class NotAutograd:\n    @staticmethod\n    def forward(ctx, x):\n        ctx.alpha = x\n",
    "class Scale(torch.autograd.Function):\n    def forward(ctx, x):\n        ctx.alpha = x\n",
    # deeper than one public attribute of the FunctionCtx
    "class Scale(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        ctx.model.forward = x\n",
    "class Scale(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        ctx._TrainContext__channel = x\n",
])
def test_the_harness_ctx_stays_protected(body):
    assert ATTR_ASSIGN in _rules(train_extra=body)


def test_the_harness_ctx_refuses_assignment_at_run_time():
    ctx = TrainContext.__new__(TrainContext)
    ctx._TrainContext__telemetry = object()  # what __init__ sets last
    with pytest.raises(ContractError, match="ctx is read-only: ctx.batches cannot be assigned"):
        ctx.batches = None
    ctx._TrainContext__compiled = 1  # the harness's own fields still change
    assert ctx._TrainContext__compiled == 1
