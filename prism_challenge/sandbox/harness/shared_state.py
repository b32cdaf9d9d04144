"""What outlives a model in the evaluation process, kept as it was before any code of the
miner's ran and put back for every model built.

The eval sandbox answers many held-out tasks one after another, each from a freshly built
model; anything a task could write somewhere that lives on and read back in the next task
would let a model learn from the held-out text it is shown (test-time training across
tasks). Module globals and instances are new for every build. What is shared:

- the warning filters: `warnings.filterwarnings` is allowed (to quiet a library), and
  `warnings.warn` raises under an "error" filter, so they can be written and read back;
- global numerics a bundle can reach through an object (`m = torch.backends.cuda.matmul;
  m.allow_tf32 = True`) or a context held open in a suspended generator (`sdpa_kernel`);
- attributes of the library's classes and functions and of its module-level objects:
  `holder = nn.Identity; holder.seen = [...]` passes any static check, since a variable
  may hold anything.

`restore` costs a few milliseconds: the classes' public attributes are compared value by
value, the functions' and objects' attribute tables by size (a bundle cannot delete or
replace what they hold: their names are private or special, which the AST policy refuses).
What is left is timing (whether a kernel ran before) and the moment the collector
finalises a previous task's objects: a few noisy bits, not text.
"""

from __future__ import annotations

import operator
import types
import warnings

# The modules a bundle may import (the AST policy's allow-list, gates/allowlist.py, which the
# harness may not import; tests/sandbox/test_shared_state.py keeps the two lists equal).
MODULES = (
    "__future__", "abc", "collections", "collections.abc", "contextlib", "copy",
    "dataclasses", "enum", "functools", "itertools", "math", "numbers", "operator", "time",
    "torch", "torch.amp", "torch.autograd", "torch.backends", "torch.backends.cuda",
    "torch.backends.cudnn", "torch.cuda", "torch.cuda.amp", "torch.distributed", "torch.fft",
    "torch.func", "torch.linalg", "torch.nn", "torch.nn.attention", "torch.nn.functional",
    "torch.nn.init", "torch.nn.parallel", "torch.nn.utils", "torch.optim",
    "torch.optim.lr_scheduler", "torch.optim.swa_utils", "torch.special",
    "torch.utils.checkpoint", "typing", "warnings",
)
MATMUL = ("allow_tf32", "allow_fp16_reduced_precision_reduction",
          "allow_bf16_reduced_precision_reduction")
CUDNN = ("allow_tf32", "enabled", "benchmark", "deterministic")
SDP = ("flash", "mem_efficient", "math", "cudnn")


def _public(name: object) -> bool:
    return isinstance(name, str) and not name.startswith("_")


class SharedState:
    """Taken before the miner's code runs; `restore()` before every model is built."""

    def __init__(self) -> None:
        import torch

        self.filters = list(warnings.filters)
        self.flags = _read_flags(torch)
        with warnings.catch_warnings():  # some modules warn when a deprecated name is read
            warnings.simplefilter("ignore")
            classes, tables = _reachable()
        self.classes = classes
        self.class_items = [dict(vars(c)) for c in classes]
        self.class_sizes = [len(items) for items in self.class_items]
        # every class's public attributes, flat, read through the live views of the class
        # tables: checked in one pass of C loops (`_classes_changed`)
        views = [vars(c) for c in classes]
        pairs = [(view, k, v) for view, items in zip(views, self.class_items, strict=True)
                 for k, v in items.items() if _public(k)]
        self.views = [view for view, _, _ in pairs]
        self.keys = [k for _, k, _ in pairs]
        self.values = [v for _, _, v in pairs]
        self.class_views = views
        self.tables = tables
        self.table_keys = [frozenset(t) for t in tables]
        self.table_sizes = [len(t) for t in tables]

    def restore(self) -> None:
        import torch

        warnings.resetwarnings()  # also moves the filters' version on: registries empty
        warnings.filters[:] = self.filters
        _write_flags(torch, self.flags)
        if self._classes_changed():
            for cls, items in zip(self.classes, self.class_items, strict=True):
                _put_back_class(cls, items)
        if list(map(len, self.tables)) != self.table_sizes:
            for table, keys in zip(self.tables, self.table_keys, strict=True):
                # public names only: a bundle can write no other, and torch's own marks
                # (compilation's, on functions it wrapped) stay where it put them
                for key in [k for k in table if _public(k) and k not in keys]:
                    del table[key]

    def _classes_changed(self) -> bool:
        if list(map(len, self.class_views)) != self.class_sizes:
            return True
        now = map(types.MappingProxyType.get, self.views, self.keys)
        return not all(map(operator.is_, now, self.values))


def _reachable() -> tuple[list[type], list[dict]]:
    """The classes, and the attribute tables of the functions and other objects, that a
    bundle can name: public members of the modules it may import from, their base classes,
    and the public classes and functions those classes hold."""
    import importlib

    classes: dict[int, type] = {}
    tables: dict[int, dict] = {}
    todo: list = []
    for name in MODULES:
        try:  # imported now, so that what a bundle imports later is in the snapshot too
            module = importlib.import_module(name)
        except ImportError:  # e.g. torch.distributed on a build without it
            continue
        todo.extend(v for k, v in list(vars(module).items()) if _public(k))
    while todo:
        obj = todo.pop()
        if isinstance(obj, type):
            if id(obj) in classes:
                continue
            classes[id(obj)] = obj
            todo.extend(obj.__mro__[1:])
            for key, value in list(vars(obj).items()):
                if _public(key) and isinstance(value, type | types.FunctionType):
                    todo.append(value)
        elif isinstance(obj, types.ModuleType):
            continue
        else:
            table = getattr(obj, "__dict__", None)
            if isinstance(table, dict) and id(table) not in tables:
                tables[id(table)] = table
    return list(classes.values()), list(tables.values())


def _put_back_class(cls: type, items: dict) -> None:
    """A class's public attributes as they were (added ones deleted)."""
    now = vars(cls)
    for key in [k for k in now if _public(k) and k not in items]:
        delattr(cls, key)
    for key, value in items.items():
        if _public(key) and now.get(key) is not value:
            setattr(cls, key, value)


def _read_flags(torch) -> dict:
    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    flags: dict = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
    for name in MATMUL:
        try:
            flags[f"matmul.{name}"] = getattr(cuda.matmul, name)
        except (AttributeError, RuntimeError):
            pass
    for name in CUDNN:
        if hasattr(cudnn, name):
            flags[f"cudnn.{name}"] = getattr(cudnn, name)
    for name in SDP:
        if hasattr(cuda, f"enable_{name}_sdp"):
            flags[f"sdp.{name}"] = bool(getattr(cuda, f"{name}_sdp_enabled")())
    return flags


def _write_flags(torch, flags: dict) -> None:
    """Each flag that moved, set back (only those: a setter may warn that it is deprecated)."""
    now = _read_flags(torch)
    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    for key, value in flags.items():
        if now.get(key) == value:
            continue
        kind, _, name = key.partition(".")
        if kind == "float32_matmul_precision":
            torch.set_float32_matmul_precision(value)
        elif kind == "matmul":
            setattr(cuda.matmul, name, value)
        elif kind == "cudnn":
            setattr(cudnn, name, value)
        elif kind == "sdp":
            getattr(cuda, f"enable_{name}_sdp")(value)
