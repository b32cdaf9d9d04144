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
    "import operator, contextlib, copy, warnings, numbers\n"
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
    "    @property\n    def width(self):\n        return 4\n",
    "def build(ctx):\n    class Inner(torch.nn.Module):\n        def forward(self, x):\n"
    "            return x\n    model = Inner()\n    model.head = torch.nn.Linear(2, 2)\n"
    "    for p in model.parameters():\n        p.requires_grad = False\n        p.grad = None\n"
    "    return model\n",
    "MSG = 'loss {:.3f} at {}'.format(1.0, 2)\nW = '{name}: {v:>{w}}'.format(name='a', v=1, w=4)\n"
    "M = '{x}'.format_map({'x': 1})\nF = format(3.14159, '.2f')\n"
    "def show(x, y, w):\n    return f'{x:.3f} {y!r:>{w}}'\n",
    "import dataclasses, typing\nT = typing.TypeVar('T')\n"
    "import dataclasses\n@dataclasses.dataclass\nclass Config:\n    width: int = 64\n"
    "    sizes: list = dataclasses.field(default_factory=list)\n"
    "    def __post_init__(self):\n        self.width = max(1, self.width)\n"
    "class Box(typing.Generic[T]):\n    def __init__(self, item: T) -> None:\n"
    "        self.item_ = item\n",
    "import copy, warnings\nwarnings.filterwarnings('ignore', category=UserWarning)\n"
    "def snapshot(m):\n    warnings.warn('copying')\n    return copy.deepcopy(m)\n",
    "class Cache(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
    "        self.register_buffer('mask', torch.tril(torch.ones(n, n)), persistent=False)\n"
    "    def forward(self, x):\n        return x * 0.5 if self.training else x\n",
    "class Lion(torch.optim.Optimizer):\n    def __init__(self, params, lr=1e-4):\n"
    "        super().__init__(params, dict(lr=lr))\n    @torch.no_grad()\n"
    "    def step(self, closure=None):\n        for group in self.param_groups:\n"
    "            for p in group['params']:\n"
    "                p.add_(p.grad.sign(), alpha=-group['lr'])\n",
    "class Tiny(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.__cache = None\n        self._Tiny__hits = 0\n"
    "    def forward(self, x):\n        match x.shape:\n            case (b, t):\n"
    "                return x\n",
    "class RoundSTE(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        return torch.round(x)\n    @staticmethod\n    def backward(ctx, g):\n"
    "        return g\n",
    # where a class of the file and its methods may go (receivers.py)
    "import functools\nclass Gate(torch.nn.Module):\n"
    "    @property\n    def scale(self):\n        return self._s\n"
    "    @scale.setter\n    def scale(self, v):\n        self._s = v\n"
    "    @torch.no_grad()\n    def reset(self):\n        self._s = 1.0\n"
    "    @functools.cached_property\n    def width(self):\n        return 4\n"
    "    @staticmethod\n    def make():\n        return Gate()\n",
    "class Base(torch.nn.Module):\n    def block(self, x):\n        return x\n"
    "class Deep(Base):\n    def block(self, x):\n        return Base.block(self, x) * 2\n"
    "def pick(m: Base) -> list[Base]:\n    return [m] if isinstance(m, (Base, Deep)) else []\n"
    "def make() -> Base:\n    return Deep()\n",
    "import dataclasses\n@dataclasses.dataclass\nclass Config:\n    width: int = 4\n"
    "WIDTH = Config.width\n",
])
def test_honest_idioms_pass(body):
    assert arch(body) == []


def test_a_clock_is_for_training_py_only():
    """training.py times its steps; architecture.py reads no clock: every held-out task
    starts when the one before it ended, so a model with a clock could hand a symbol on."""
    timing = ("import time\nt0 = time.perf_counter()\nt1 = time.monotonic_ns()\n"
              "from time import time as now\n")
    assert check_policy({"architecture.py": ARCH, "training.py": TRAIN + timing}) == []
    got = check_policy({"architecture.py": ARCH + timing, "training.py": TRAIN})
    assert {(v.rule, v.line) for v in got} == {
        ("AST-INTROSPECT", ARCH.count("\n") + n) for n in (1, 2, 3, 4)}
    assert all("may not read a clock" in v.message for v in got)


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
    # a module got by getattr: `m.functional.torch.sys` would not be checked at all
    ("m = getattr(torch, 'nn')\n", "AST-MODULE-ALIAS"),
    ("m = getattr(torch, 'nn', None)\n", "AST-MODULE-ALIAS"),
    ("m = getattr(torch.backends, 'cudnn')\n", "AST-MODULE-ALIAS"),
    ("from torch import nn\nm = getattr(nn, 'functional')\n", "AST-MODULE-ALIAS"),
    ("m = getattr(getattr(torch, 'nn'), 'functional')\n", "AST-MODULE-ALIAS"),
    # a classmethod's cls.method is the plain function: called with any object as self
    ("class A:\n    def w(self):\n        return self.__x\n    @classmethod\n"
     "    def peek(cls, o):\n        return cls.w(o)\n", "AST-SELF"),
    ("def f(g):\n    return g.cell_contents\n", "AST-INTROSPECT"),
    ("x = bytearray(10)\n", "AST-BLOB"),
    ("x = memoryview(b'')\n", "AST-BLOB"),
    ("x = 'a' * 1\ny = '" + "0123456789abcdef" * 3 + "'\n", "AST-BLOB"),
    ("x = [" + ", ".join(["1"] * 65) + "]\n", "AST-LITERAL"),
    # uninitialised memory: what the process freed (a compiled graph does not fill it)
    ("x = torch.empty(3)\n", "AST-INTROSPECT"),
    ("from torch import empty_like\n", "AST-MEMBER"),
    ("def f(t):\n    return t.new_empty(3)\n", "AST-INTROSPECT"),
    ("def f(t):\n    t.resize_(1000)\n", "AST-INTROSPECT"),
    ("def f(t):\n    return t.as_strided_((2,), (1,))\n", "AST-INTROSPECT"),
    ("def f(t):\n    return t.new(3)\n", "AST-INTROSPECT"),
    ("x = torch.Tensor(3, 4)\n", "AST-INTROSPECT"),
    ("from torch import Tensor\nx = Tensor(3)\n", "AST-INTROSPECT"),
    ("T = torch.Tensor\n", "AST-INTROSPECT"),
    ("from torch.nn.modules import loss\nf = loss.F\n", "AST-MEMBER"),
    ("def f(x):\n    return super(torch.Tensor, x)\n", "AST-SELF"),
    ("class A:\n    @staticmethod\n    def f(self):\n        self.x = 1\n", "AST-SELF"),
    ("class A:\n    def f(self):\n        pass\ng = A.f\n", "AST-SELF"),
    ("class A:\n    def f(self):\n        for self in [1]:\n            pass\n", "AST-SELF"),
    ("import torch as self\n", "AST-SELF"),
    ("def f(m):\n    m.cuda = None\n", "AST-ATTR-ASSIGN"),
    ("def f(c):\n    c.batches = None\n", "AST-ATTR-ASSIGN"),
    ("x = {" + ", ".join(f"{i}: {i}" for i in range(65)) + "}\n", "AST-LITERAL"),
    # format strings that reach attributes or indexes, or are not literals
    ("def f(g):\n    return '{0.gi_frame}'.format(g)\n", "AST-FORMAT"),
    ("def f(x):\n    return '{0[0]}'.format(x)\n", "AST-FORMAT"),
    ("def f(x):\n    return '{0:{1.real}}'.format(x, 4)\n", "AST-FORMAT"),
    ("def f(x):\n    return '{x.y}'.format_map({'x': x})\n", "AST-FORMAT"),
    ("def f(x):\n    return '{'.format(x)\n", "AST-FORMAT"),
    ("def f(s, x):\n    return s.format(x)\n", "AST-FORMAT"),
    ("def f(s, d):\n    return s.format_map(d)\n", "AST-FORMAT"),
    ("def f(x):\n    return str.format('{}', x)\n", "AST-FORMAT"),
    ("def f(x):\n    return f'{x}'.format(x)\n", "AST-FORMAT"),
    ("def f(x):\n    return getattr('{0.y}', 'format')(x)\n", "AST-FORMAT"),
    ("def f(g):\n    return f'{g.gi_frame}'\n", "AST-INTROSPECT"),
    ("def f(x, g):\n    return f'{x:{g.gi_frame.f_locals}}'\n", "AST-INTROSPECT"),
    ("def f(x, c):\n    return f'{x!r:>{c._secret}}'\n", "AST-PRIVATE"),
    # modules and members not on the allow-list
    ("import random\n", "AST-IMPORT"),
    ("import linecache\n", "AST-IMPORT"),
    ("import importlib.resources\n", "AST-IMPORT"),
    ("import string\n", "AST-IMPORT"),
    ("from warnings import formatwarning\n", "AST-FILE"),
    ("import warnings\nwarnings.showwarning('m', UserWarning, '/inputs/x', 1)\n", "AST-FILE"),
    ("import warnings\nwith warnings.catch_warnings(record=True) as w:\n    pass\n",
     "AST-INTROSPECT"),
    ("import warnings\nwarnings.resetwarnings()\n", "AST-MEMBER"),
    ("x = torch.nn.LazyLinear(4)\n", "AST-MEMBER"),
    ("from torch.optim.optimizer import register_optimizer_step_pre_hook\n", "AST-MEMBER"),
    ("x = torch.get_rng_state()\n", "AST-SEED"),
    ("g = torch.Generator()\n", "AST-SEED"),
    ("x = torch.initial_seed()\n", "AST-SEED"),
    ("torch.set_num_threads(1)\n", "AST-ATTR-ASSIGN"),
    ("torch.set_float32_matmul_precision('high')\n", "AST-ATTR-ASSIGN"),
    ("import time\ntime.sleep(1)\n", "AST-PROCESS"),
    ("import dataclasses\ndef f(b):\n    return dataclasses.fields(b)\n", "AST-INTROSPECT"),
    ("from collections import namedtuple\n", "AST-DYNAMIC"),
    ("y = torch.func.functional_call\n", "AST-DYNAMIC"),
    ("a = torch.cuda.memory.CUDAPluggableAllocator\n", "AST-FFI"),
    ("def f(x):\n    return x.untyped_storage()\n", "AST-INTROSPECT"),
    ("def f(x):\n    return x.as_strided((2,), (1,))\n", "AST-INTROSPECT"),
    ("def f(b):\n    return b.loss.grad_fn\n", "AST-INTROSPECT"),
    # memory every forked eval task process would share
    ("def f(t):\n    return t.share_memory_()\n", "AST-PROCESS"),
    ("def f(t):\n    return torch.Tensor.share_memory_(t)\n", "AST-PROCESS"),
    ("def f(m):\n    return m.share_memory()\n", "AST-PROCESS"),
    ("def f(p):\n    return torch.optim.Adagrad(p).share_memory()\n", "AST-PROCESS"),
    # nn.Module machinery and special methods defined or assigned by the bundle
    ("class A(torch.nn.Module):\n    def state_dict(self):\n        return {}\n",
     "AST-OVERRIDE"),
    ("class A(torch.nn.Module):\n    def _apply(self, fn):\n        return self\n",
     "AST-OVERRIDE"),
    ("class A:\n    def train(self, mode=True):\n        return self\n", "AST-OVERRIDE"),
    ("class A:\n    parameters = property(lambda self: [])\n", "AST-OVERRIDE"),
    ("class A:\n    @property\n    def training(self):\n        return True\n",
     "AST-OVERRIDE"),
    ("class A:\n    for eval in range(1):\n        pass\n", "AST-OVERRIDE"),
    ("class A:\n    __slots__ = ('eval',)\n", "AST-OVERRIDE"),
    ("class A(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.state_dict = dict\n", "AST-OVERRIDE"),
    ("class A(torch.nn.Module):\n    def f(self):\n        del self.train\n", "AST-OVERRIDE"),
    ("class A(torch.nn.Module):\n    def f(self):\n        setattr(self, 'to', None)\n",
     "AST-OVERRIDE"),
    ("def f(model):\n    for m in model.modules():\n        m.training = False\n",
     "AST-OVERRIDE"),
    ("class A(torch.nn.Module):\n    def f(self):\n        return self._forward_hooks\n",
     "AST-PRIVATE"),
    ("class A(torch.nn.Module):\n    def f(self):\n        self._modules.clear()\n",
     "AST-PRIVATE"),
    ("class A(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.register_state_dict_post_hook(print)\n", "AST-HOOK"),
    ("class A:\n    def __repr__(self):\n        return 'A'\n", "AST-OVERRIDE"),
    ("class Sneaky(torch.optim.AdamW):\n    @property\n    def param_groups(self):\n"
     "        return []\n", "AST-OVERRIDE"),
    ("class A:\n    def __eq__(self, other):\n        return True\n", "AST-OVERRIDE"),
    ("class A:\n    def __call__(self, x):\n        return x\n", "AST-OVERRIDE"),
    ("class A:\n    def __set__(self, obj, value):\n        pass\n", "AST-OVERRIDE"),
    ("def __getattr__(name):\n    return 1\n", "AST-OVERRIDE"),
    ("class A:\n    def __set_name__(self, owner, name):\n        pass\n", "AST-DYNAMIC"),
    ("class A:\n    def __class_getitem__(cls, item):\n        return cls\n", "AST-DYNAMIC"),
    ("class A:\n    def __new__(cls):\n        return 1\n", "AST-DYNAMIC"),
    ("class A(torch.nn.Module, flag=True):\n    pass\n", "AST-DYNAMIC"),
    # attribute reads that no Attribute node shows
    ("def f(c):\n    match c:\n        case object(_TrainContext__core=m):\n"
     "            return m\n", "AST-PRIVATE"),
    ("def f(g):\n    match g:\n        case object(gi_frame=fr):\n            return fr\n",
     "AST-INTROSPECT"),
    ("import functools\nclass A:\n    def grab(self, c):\n        functools.wraps(c)(self)\n"
     "        return self._TrainContext__core\n", "AST-INTROSPECT"),
    ("class A:\n    def grab(self):\n        return self._TrainContext__core\n",
     "AST-PRIVATE"),
    ("def make():\n    return torch.nn.Module\nclass A(make()):\n    pass\n", "AST-DYNAMIC"),
])
def test_denied_constructs(body, rule):
    assert rule in rules(body)


def test_spread_out_strings_hit_the_file_limit():
    body = "\n".join(f"S{i} = '{'word ' * 40}'" for i in range(25)) + "\n"
    found = [v for v in arch(body) if v.rule == "AST-LITERAL"]
    assert len(found) == 1 and "4096 characters" in found[0].message


def test_names_cannot_carry_what_strings_may_not():
    """Attribute names come back as strings (`named_parameters`, `state_dict` keys): one
    long name, or many made-up ones, is refused like a long string."""
    long = "w" + "q7" * 40
    found = [v for v in arch(f"def f(m):\n    m.{long} = 1\n") if v.rule == "AST-LITERAL"]
    assert len(found) == 1 and "81 characters (limit 64)" in found[0].message
    many = "def f(m):\n" + "".join(f"    m.w{i:05d}{'x' * 50} = {i % 7}\n"
                                    for i in range(80))
    found = [v for v in arch(many) if v.rule == "AST-LITERAL"]
    assert len(found) == 1 and "exceed 4096 characters together" in found[0].message
    assert found[0].line > 4096 // 56  # at the name that crossed it, not the first
    repeated = "def f(m):\n" + f"    m.w{'x' * 60} = 1\n" * 200  # one name, many uses
    assert [v for v in arch(repeated) if v.rule == "AST-LITERAL"] == []


def test_violations_carry_file_line_and_an_actionable_message():
    [v] = check_policy({"architecture.py": ARCH, "training.py": "import os\n" + TRAIN})
    assert (v.rule, v.file, v.line) == ("AST-IMPORT", "training.py", 1)
    assert "'os'" in v.message and "torch" not in v.message  # no allow-list dump
    assert v.message.endswith('the modules a bundle may import are listed in docs/gates.md, '
                              '"The allow-list, and why"')
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


def test_side_door_messages_name_the_allowed_alternative():
    [v] = arch("import warnings\nline = warnings.formatwarning('', UserWarning, '/inputs/x', 1)\n")
    assert (v.rule, v.line) == ("AST-FILE", 7)
    assert "linecache" in v.message and "warnings.warn" in v.message
    [v] = arch("import warnings\nwarnings.showwarnings('x')\n")
    assert v.rule == "AST-MEMBER" and "filterwarnings, simplefilter, warn" in v.message
    [v] = arch("x = torch.nn.Lienar(2, 2)\n")
    assert v.rule == "AST-MEMBER" and "did you mean Linear" in v.message
    [v] = arch("import random\n")
    assert "torch.rand" in v.message and "docs/gates.md" in v.message


def test_format_refusal_names_the_field():
    [v] = arch("def f(g):\n    return '{0.gi_frame.f_back}'.format(g)\n")
    assert v.rule == "AST-FORMAT" and "'{0.gi_frame.f_back}'" in v.message


def test_overriding_machinery_is_reported_once_per_binding():
    found = arch("class A(torch.nn.Module):\n    def state_dict(self):\n        return {}\n"
                 "    def parameters(self):\n        return iter(())\n")
    assert [(v.rule, v.line) for v in found] == [("AST-OVERRIDE", 7), ("AST-OVERRIDE", 9)]
    assert "state_dict" in found[0].message and "forward()" in found[0].message


def test_input_is_fine_as_a_parameter_and_refused_as_the_builtin():
    """PyTorch's own `forward(self, input)`: inside the function the name is the parameter.
    Defaults, and every other use, are evaluated where `input` is the builtin."""
    assert arch("""
        def scale(input, x):
            return input * x

        class Head(torch.nn.Module):
            def forward(self, input):
                double = lambda input: input * 2
                return double(input)
        """) == []
    for body in ("def f(a=input):\n    return a\n", "def f(a):\n    return input()\n",
                 "def f(a, b=lambda: input):\n    return a\n", "g = input\n"):
        [v] = arch(body)
        assert v.rule == "AST-FILE" and v.message.startswith("'input' is not allowed"), body


def test_each_violation_is_reported_once():
    """`torch.manual_seed` is one violation: not also reported as `.manual_seed`."""
    found = arch("def seeded():\n    torch.manual_seed(0)\n")
    assert [(v.rule, v.message.split(" is not")[0]) for v in found] == [
        ("AST-SEED", "'torch.manual_seed'")]
    # two different refused names on one line stay two reports
    assert len(arch("import os, sys\n")) == 2
