"""AST policy details: what honest code may do, what it may not, and bad input."""

from __future__ import annotations

import textwrap

import pytest

from prism_challenge.gates import Violation, check_policy

TRAIN = "def train(ctx):\n    for batch in ctx.batches(4):\n        batch.loss.backward()\n"
ARCH = "import torch\n\n\ndef build_model(ctx):\n    return torch.nn.Linear(4, ctx.vocab_size)\n"


def arch(body: str) -> list[Violation]:
    return check_policy({"architecture.py": ARCH + textwrap.dedent(body), "training.py": TRAIN})


def rules(body: str) -> set[str]:
    return {v.rule for v in arch(body)}


@pytest.mark.parametrize("body", [
    "from __future__ import annotations\n__all__ = ['build_model']\n",
    "if __name__ == '__main__':\n    print('hi')\n",
    "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self._cache = None\n        setattr(self, 'layer0', torch.nn.Linear(2, 2))\n"
    "        self.n = getattr(self, 'layer0').in_features\n"
    "        self.has = hasattr(self, '_cache')\n",
    "import torch.nn.functional as F\nfrom torch import nn\nact = F.gelu\nLayer = nn.Linear\n",
    "from torch.utils.checkpoint import checkpoint\nfrom torch.nn.utils import clip_grad_norm_\n",
    "import torch.distributed as dist\ndef sync(t):\n    if dist.is_initialized():\n"
    "        dist.all_reduce(t, op=dist.ReduceOp.SUM)\n",
    "from torch.nn.parallel import DistributedDataParallel as DDP\n",
    "import math, typing, dataclasses, functools, itertools, collections, enum, abc\n"
    "import operator, time, contextlib, copy, warnings, numbers\n"
    "from collections import OrderedDict\nfrom functools import partial\n",
    "def f(x):\n    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
    "        return torch.cuda.is_available() and torch.backends.cuda.matmul.allow_tf32\n",
    '"""' + "A long docstring about the design. " * 80 + '"""\n',
    "MSG = f'bad shape {1}: expected {2}'\nSIZES = (64, 128, 256, 512)\n",
    "def decode(x):\n    return x\ny = decode(1)\n"
    "class C:\n    def decode(self):\n        return 1\nz = C().decode()\n",
    "class Base(torch.nn.Module):\n    def __init__(self):\n        super(Base, self).__init__()\n"
    "    def forward(self, x):\n        return x\n"
    "class Child(Base):\n    def forward(self, x):\n        return Base.forward(self, x) + 1\n"
    "    @classmethod\n    def make(cls):\n        return cls()\n"
    "    @property\n    def width(self):\n        return 4\n",
    "def build(ctx):\n    class Inner(torch.nn.Module):\n        def forward(self, x):\n"
    "            return x\n    model = Inner()\n    model.head = torch.nn.Linear(2, 2)\n"
    "    for p in model.parameters():\n        p.requires_grad = False\n        p.grad = None\n"
    "    return model\n",
])
def test_honest_idioms_pass(body):
    assert arch(body) == []


@pytest.mark.parametrize("body, rule", [
    ("import torch.distributed as dist\ndist.init_process_group('gloo')\n", "AST-PROCESS"),
    ("import torch.distributed as dist\ndist.broadcast_object_list([1])\n", "AST-PROCESS"),
    ("x = torch.nn.parallel.DataParallel\n", "AST-PROCESS"),
    ("from torch import load as fetch\n", "AST-DESERIALIZE"),
    ("import torch.utils.data\n", "AST-PROCESS"),
    ("from torch import _C\n", "AST-PRIVATE"),
    ("from . import helper\n", "AST-IMPORT"),
    ("from torch import *\n", "AST-IMPORT"),
    ("import numpy\n", "AST-IMPORT"),
    ("def f(m):\n    m._parameters.clear()\n", "AST-PRIVATE"),
    ("def f(m):\n    return getattr(m, '_buffers')\n", "AST-PRIVATE"),
    ("def f(m):\n    return getattr(m, '__class__')\n", "AST-INTROSPECT"),
    ("def f(m):\n    return getattr(torch, 'load')\n", "AST-DESERIALIZE"),
    ("f = type('X', (), {})\n", "AST-INTROSPECT"),
    ("class A(metaclass=abc.ABCMeta):\n    pass\n", "AST-DYNAMIC"),
    ("class A:\n    def __del__(self):\n        pass\n", "AST-OVERRIDE"),
    ("class A:\n    def __reduce__(self):\n        return (print, ())\n", "AST-DESERIALIZE"),
    ("class P(torch.nn.Parameter):\n    pass\n", "AST-TENSOR-SUBCLASS"),
    ("torch.nn.functional.__dict__\n", "AST-INTROSPECT"),
    ("def f():\n    global __builtins__\n", "AST-INTROSPECT"),
    ("def f(x):\n    x.forward = None\n", "AST-ATTR-ASSIGN"),
    ("del torch.nn.functional.gelu\n", "AST-ATTR-ASSIGN"),
    ("torch.backends.cudnn.deterministic = False\n", "AST-ATTR-ASSIGN"),
    ("t = torch.nn\n", "AST-MODULE-ALIAS"),
    ("x = bytearray(10)\n", "AST-BLOB"),
    ("x = memoryview(b'')\n", "AST-BLOB"),
    ("x = 'a' * 1\ny = '" + "0123456789abcdef" * 3 + "'\n", "AST-BLOB"),
    ("x = [" + ", ".join(["1"] * 65) + "]\n", "AST-LITERAL"),
    ("from torch.nn.modules import loss\nf = loss.F\n", "AST-MEMBER"),
    ("def f(x):\n    return super(torch.Tensor, x)\n", "AST-SELF"),
    ("class A:\n    @staticmethod\n    def f(self):\n        self.x = 1\n", "AST-SELF"),
    ("class A:\n    def f(self):\n        pass\ng = A.f\n", "AST-SELF"),
    ("class A:\n    def f(self):\n        for self in [1]:\n            pass\n", "AST-SELF"),
    ("import torch as self\n", "AST-SELF"),
    ("def f(m):\n    m.cuda = None\n", "AST-ATTR-ASSIGN"),
    ("def f(c):\n    c.batches = None\n", "AST-ATTR-ASSIGN"),
    ("x = {" + ", ".join(f"{i}: {i}" for i in range(65)) + "}\n", "AST-LITERAL"),
])
def test_denied_constructs(body, rule):
    assert rule in rules(body)


def test_spread_out_strings_hit_the_file_limit():
    body = "\n".join(f"S{i} = '{'word ' * 40}'" for i in range(25)) + "\n"
    found = [v for v in arch(body) if v.rule == "AST-LITERAL"]
    assert len(found) == 1 and "4096 characters" in found[0].message


def test_violations_carry_file_line_and_an_actionable_message():
    [v] = check_policy({"architecture.py": ARCH, "training.py": "import os\n" + TRAIN})
    assert (v.rule, v.file, v.line) == ("AST-IMPORT", "training.py", 1)
    assert "'os'" in v.message and "may import only" in v.message
    assert str(v).startswith("AST-IMPORT training.py:1: import of 'os'")


@pytest.mark.parametrize("files, expected", [
    ({"architecture.py": ARCH}, [("AST-CONTRACT", "training.py", 0)]),
    ({"architecture.py": b"\xff\xfe", "training.py": TRAIN},
     [("AST-SYNTAX", "architecture.py", 0)]),
    ({"architecture.py": "x = 1\x00", "training.py": TRAIN},
     [("AST-SYNTAX", "architecture.py", 0)]),
    ({"architecture.py": "async def build_model(ctx):\n    pass\n", "training.py": TRAIN},
     [("AST-CONTRACT", "architecture.py", 1)]),
    ({"architecture.py": "def build_model(ctx, *, size):\n    pass\n", "training.py": TRAIN},
     [("AST-CONTRACT", "architecture.py", 1)]),
    ({"architecture.py": "def build_model():\n    pass\n", "training.py": TRAIN},
     [("AST-CONTRACT", "architecture.py", 1)]),
    ({"architecture.py": "build_model = lambda ctx: None\n", "training.py": TRAIN},
     [("AST-CONTRACT", "architecture.py", 1)]),
    ({"architecture.py": "def build_model(ctx, width=64):\n    pass\n", "training.py": TRAIN,
      "prism.toml": "name = 'x'\n"}, []),
])
def test_contract_and_bad_input(files, expected):
    assert [(v.rule, v.file, v.line) for v in check_policy(files)] == expected


@pytest.mark.parametrize("expr", [
    "torch" + ".nn" * 20000, "-" * 50000 + "1", "1+" * 900 + "1", "[" * 150 + "]" * 150,
])
def test_pathologically_nested_code_is_refused_not_crashed(expr):
    found = arch(f"x = {expr}\n")
    assert {v.rule for v in found} == {"AST-SYNTAX"}
    assert "nested" in found[0].message and found[0].line in (0, 6)
