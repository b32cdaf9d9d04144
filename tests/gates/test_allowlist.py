"""The allow-list table itself: every entry is real, nothing on it leads off it, and the
names of nn.Module's machinery cover everything the pinned torch defines."""

from __future__ import annotations

import importlib
import inspect

import pytest
import torch

from prism_challenge.gates import allowlist as A
from prism_challenge.gates import rules as R


@pytest.mark.parametrize("module", A.modules())
def test_every_listed_member_exists_and_is_not_a_module(module):
    obj = importlib.import_module(module)
    assert inspect.ismodule(obj)
    for name in sorted(A.PATHS[module]):
        assert hasattr(obj, name), f"{module}.{name} does not exist"
        member = getattr(obj, name)
        # A submodule must be a key of its own, with its own list, or its members would
        # all be reachable through it.
        assert not inspect.ismodule(member), f"{module}.{name} is a module"
        for attr in dir(member):
            if attr.startswith("_"):
                continue  # private and dunder attributes are refused by their own rules
            try:
                value = inspect.getattr_static(member, attr)
            except AttributeError:
                continue
            assert not inspect.ismodule(value), f"{module}.{name}.{attr} leads to a module"


def test_parents_of_listed_submodules_are_listed_or_refused():
    for module in A.modules():
        parts = module.split(".")
        for k in range(1, len(parts)):
            parent = ".".join(parts[:k])
            assert parent in A.PATHS, f"{module} is reachable only through {parent}"


def test_no_side_door_module_or_member_is_allowed():
    for module in ("os", "sys", "io", "pathlib", "linecache", "traceback", "inspect",
                   "tokenize", "pkgutil", "importlib", "importlib.resources", "codecs",
                   "random", "string", "gc", "types", "builtins", "numpy"):
        assert A.lookup(module) is False, module  # refused at its import
    for path in ("warnings.formatwarning", "warnings.showwarning", "warnings.warn_explicit",
                 "warnings.catch_warnings", "warnings._showwarnmsg", "warnings.linecache",
                 "torch.cuda.memory.CUDAPluggableAllocator", "torch.get_rng_state",
                 "torch.Generator", "torch.set_default_dtype", "dataclasses.asdict",
                 "collections.namedtuple", "time.sleep", "functools.singledispatch",
                 "torch.func.functional_call", "torch.nn.modules", "torch.optim.optimizer"):
        assert isinstance(A.lookup(path), tuple), path
    assert sorted(A.PATHS["warnings"]) == ["filterwarnings", "simplefilter", "warn"]


def test_lookup_allows_listed_members_and_what_hangs_off_them():
    for path in ("torch", "torch.nn.functional.cross_entropy", "torch.nn.Linear.weight",
                 "torch.optim.AdamW", "torch.utils.checkpoint.checkpoint", "math.sqrt",
                 "torch.distributed.ReduceOp.SUM", "torch.backends.cuda.matmul.allow_tf32"):
        assert A.lookup(path) is None, path


def test_unlisted_members_are_refused_with_alternatives():
    rule, why = A.lookup("warnings.formatwarnings")
    assert rule == R.MEMBER and "filterwarnings, simplefilter, warn" in why
    rule, why = A.lookup("torch.nn.Linaer")
    assert rule == R.MEMBER and "did you mean Linear" in why
    rule, why = A.lookup("torch.distributed.init_process_group")
    assert rule == R.PROCESS and "collectives" in why  # the module's own reason
    rule, why = A.lookup("torch.utils.tensorboard")
    assert rule == R.IMPORT and "checkpoint" in why
    assert A.lookup("socket.socket") is False  # refused at its import


def test_harness_names_cover_every_name_of_nn_module():
    own = {"forward", "extra_repr"}  # what a model defines
    module_names = {n for n in dir(torch.nn.Module) if not n.startswith("__")}
    state = set(vars(torch.nn.Module()))
    assert (module_names | state) - own <= R.HARNESS_NAMES
    assert not own & R.HARNESS_NAMES
    optimiser = {n for n in dir(torch.optim.Optimizer) if not n.startswith("__")}
    optimiser |= set(vars(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)))
    assert optimiser - {"step", "state"} <= R.HARNESS_NAMES
    dunders = {n for n in vars(torch.nn.Module) if n.startswith("__") and n.endswith("__")
               and callable(getattr(torch.nn.Module, n))}
    assert not dunders & R.ALLOWED_DUNDER_DEFS - {"__init__"}
    assert R.ALLOWED_DUNDER_DEFS == {"__init__", "__post_init__"}
