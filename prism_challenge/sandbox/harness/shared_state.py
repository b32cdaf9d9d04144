"""What outlives a model in the evaluation process, kept as it was before any code of the
miner's ran and put back for every model built.

The eval sandbox answers many held-out tasks one after another, each from a freshly built
model; anything a task could write somewhere that lives on and read back in the next task
would let a model learn from the held-out text it is shown (test-time training across
tasks). Module globals and instances are new for every build. What is shared:

- the warning filters: `warnings.filterwarnings` is allowed (to quiet a library), and
  `warnings.warn` raises under an "error" filter, so they can be written and read back
  (torch's own warn-once sites warn every time here, for the same reason);
- global numerics a bundle can reach through an object (`m = torch.backends.cuda.matmul;
  m.allow_tf32 = True`) or a context held open in a suspended generator (`sdpa_kernel`);
- attributes of the library's classes and of every object a bundle can reach from them
  by public names: `holder = nn.Identity; holder.seen = [...]` passes any static check,
  since a variable may hold anything, and so does a TypeVar a class holds
  (`nn.Module.T_destination`), the function behind a staticmethod, an enum member, an
  object held by a module-level object;
- the entries of the public lists, dicts and sets reachable the same way
  (`torch.special.common_args[...] = ...`), and the reentrant locks (a logging handler's:
  held and never released, its repr counts the holds);
- the memo caches of the process (`functools.lru_cache`): `typing.Literal[key]` is kept in
  one, by key, and a cached answer comes ~15 times faster than a new one, so a task can
  leave keys behind that the next one finds with a clock (~128 keys per cache, a bit each,
  read without error), and so are the caches of abstract classes (`isinstance(0,
  collections.abc.Sized)` is answered ~5 times faster once asked: a bit for each pair of
  an ABC and a type that outlives the task). Every such cache in the process is emptied for
  every build: the ones the collector lists when the snapshot is taken, listed again
  whenever a module was imported since.

`restore` costs a few milliseconds: every public attribute is compared by identity in one
pass of C loops and only a changed table is walked (added public names deleted, replaced
ones set back; private and special names cannot be written, which the AST policy
refuses). What is left is timing (whether a kernel ran before), the moment the collector
finalises a previous task's objects, objects a bundle can only reach as the result of a
call, which the walk does not list (the memo caches among them are emptied all the same),
and the order in which the memory allocators (pymalloc's pools, the C library's caches)
hand out blocks of a size, which a task can set by what it frees and the next read from
addresses (`id`, `hash`, a set's order): a red team carried 22 bits a task that way without
error, through the free lists emptied here. Only a process per task closes that
(docs/security.md).
"""

from __future__ import annotations

import abc
import functools
import gc
import logging
import operator
import sys
import threading
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
# the cuBLAS settings `torch.backends.cuda.matmul` reads and writes, in the order they are
# set back: the legacy ones move `fp32_precision` (the new API) too, so it comes last; each
# reduction flag with its split-k twin (written together, as a pair)
MATMUL = ("allow_tf32", "allow_fp16_accumulation",
          "allow_fp16_reduced_precision_reduction",
          "allow_fp16_reduced_precision_reduction_split_k",
          "allow_bf16_reduced_precision_reduction",
          "allow_bf16_reduced_precision_reduction_split_k", "fp32_precision")
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
            classes, tables, containers, locks = _reachable()
        self.classes = classes
        self.class_items = [dict(vars(c)) for c in classes]
        self.class_sizes = [len(items) for items in self.class_items]
        # every class's public attributes, flat, read through the live views of the class
        # tables: checked in one pass of C loops (`_changed`)
        views = [vars(c) for c in classes]
        self.class_pairs = _public_pairs(views, self.class_items)
        self.class_views = views
        self.tables = tables
        self.table_items = [dict(t) for t in tables]
        self.table_sizes = [len(t) for t in tables]
        self.table_pairs = _public_pairs(tables, self.table_items)
        self.containers = containers
        self.container_items = [_copy(c) for c in containers]
        self.locks = locks  # a logging handler's, say: held, its repr counts the holds
        (self.caches, self.abcs), self.modules = _memo_caches(), len(sys.modules)

    def restore(self) -> None:
        import torch

        warnings.resetwarnings()  # also moves the filters' version on: registries empty
        warnings.filters[:] = self.filters
        # torch's warn-once sites (C++) would otherwise be bits set for the process's life:
        # warned in one task, silent in the next
        torch.set_warn_always(True)
        _write_flags(torch, self.flags)
        if _changed(self.class_views, self.class_sizes, self.class_pairs):
            for cls, items in zip(self.classes, self.class_items, strict=True):
                _put_back_class(cls, items)
        if _changed(self.tables, self.table_sizes, self.table_pairs):
            for table, items in zip(self.tables, self.table_items, strict=True):
                _put_back_table(table, items)
            # a logger's level set back leaves what `isEnabledFor` cached from the new one
            logging.Logger.manager._clear_cache()
        for lock in self.locks:
            while lock._is_owned():
                lock.release()
        if len(sys.modules) != self.modules:  # an import since may have made new caches
            gc.unfreeze()  # the collector lists only what is not frozen
            (self.caches, self.abcs), self.modules = _memo_caches(), len(sys.modules)
        for cache in self.caches:
            cache.cache_clear()
        for cls in self.abcs:
            cls._abc_caches_clear()
        # A full collection empties the interpreter's free lists (tuples, floats, lists,
        # dicts, frames), whose order a task can set by what it frees and the next read back
        # from the addresses it is handed (`id`, `hash`, a set's order): thousands of bits a
        # task. It also frees the last task's cycles; what lives on is then frozen, so each
        # collection walks only what one task made (milliseconds), and `gc.get_objects()`
        # lists only what was made since (eval_main's check of a meta build relies on it).
        gc.collect()
        gc.freeze()
        if list(map(_same, self.containers, self.container_items)).count(False):
            for box, items in zip(self.containers, self.container_items, strict=True):
                if not _same(box, items):
                    _put_back_container(box, items)

    def changed(self) -> bool:
        """Whether anything tracked differs from the snapshot (flags and filters aside)."""
        return (_changed(self.class_views, self.class_sizes, self.class_pairs)
                or _changed(self.tables, self.table_sizes, self.table_pairs)
                or not all(map(_same, self.containers, self.container_items)))


def _public_pairs(views: list, items: list[dict]) -> tuple[list, list, list]:
    """(view, key, value) of every public attribute, as three flat lists."""
    pairs = [(view, k, v) for view, its in zip(views, items, strict=True)
             for k, v in its.items() if _public(k)]
    return ([view for view, _, _ in pairs], [k for _, k, _ in pairs],
            [v for _, _, v in pairs])


def _changed(views: list, sizes: list[int], pairs: tuple[list, list, list]) -> bool:
    """Whether any table grew or shrank or holds another object under a public name: one
    pass of C loops over every table and every public attribute."""
    if list(map(len, views)) != sizes:
        return True
    tables, keys, values = pairs
    now = map(_get, tables, keys)
    return not all(map(operator.is_, now, values))


def _get(table, key):
    return table.get(key, _MISSING)


_MISSING = object()


_PLAIN = (int, float, complex, str, bytes, bool, type(None))
_CONTAINERS = (list, dict, set, bytearray)
_RLOCK = type(threading.RLock())


def _reachable() -> tuple[list[type], list[dict], list, list]:
    """The classes, and the attribute tables of every other object, that a bundle can name:
    public members of the modules it may import from, their base classes, and whatever a
    public attribute of a class or object leads to, transitively (a TypeVar, an enum
    member, the function behind a staticmethod or property, an object held by an object).
    Only the modules it may import are followed, and no plain values."""
    import importlib

    classes: dict[int, type] = {}
    tables: dict[int, dict] = {}
    containers: dict[int, list | dict | set | bytearray] = {}
    locks: list = []
    seen: set[int] = set()
    todo: list = []
    for name in MODULES:
        try:  # imported now, so that what a bundle imports later is in the snapshot too
            module = importlib.import_module(name)
        except ImportError:  # e.g. torch.distributed on a build without it
            continue
        todo.extend(v for k, v in list(vars(module).items()) if _public(k))
    while todo:
        obj = todo.pop()
        if id(obj) in seen or type(obj) in _PLAIN:
            continue
        if isinstance(obj, types.ModuleType):
            # followed only where it is one a bundle may import, under its own name or
            # wrapped (torch.backends.cudnn is a module object whose table holds only `m`,
            # the real module, and forwards every other name to it)
            if getattr(obj, "__name__", None) in MODULES:
                seen.add(id(obj))
                todo.extend(v for k, v in list(vars(obj).items()) if _public(k))
            continue
        seen.add(id(obj))
        if type(obj) in _CONTAINERS:
            containers[id(obj)] = obj
        elif type(obj) is _RLOCK:
            locks.append(obj)
        if isinstance(obj, list | tuple | set | frozenset):
            todo.extend(obj)
            continue
        if isinstance(obj, dict):
            todo.extend(obj.values())
            continue
        if isinstance(obj, type):
            classes[id(obj)] = obj
            todo.extend(obj.__mro__[1:])
            items = vars(obj)
        else:
            try:
                items = object.__getattribute__(obj, "__dict__")
            except (AttributeError, TypeError):
                continue
            if not isinstance(items, dict):
                continue
            tables[id(items)] = items
        for key, value in list(items.items()):
            if not _public(key):
                continue
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            elif isinstance(value, property):
                todo.extend(f for f in (value.fget, value.fset, value.fdel) if f is not None)
                continue
            todo.append(value)
    return list(classes.values()), list(tables.values()), list(containers.values()), locks


def _memo_caches() -> tuple[list, list[type]]:
    """Every `functools.lru_cache` wrapper and every abstract class in the process, found
    by the collector: those behind a closure (typing's subscription caches) as well as
    those a name reaches."""
    kind, meta = functools._lru_cache_wrapper, abc.ABCMeta
    found = gc.get_objects()
    kinds = list(map(type, found))  # type(), never a property of the object
    return ([o for o, k in zip(found, kinds, strict=False) if k is kind],
            [o for o, k in zip(found, kinds, strict=False) if issubclass(k, meta)])


def _put_back_table(table: dict, items: dict) -> None:
    """An object's public attributes as they were (added ones deleted). Only public names:
    a bundle can write no other, and torch's own marks (compilation's, on functions it
    wrapped) stay where it put them."""
    for key in [k for k in table if _public(k) and k not in items]:
        del table[key]
    for key, value in items.items():
        if _public(key) and table.get(key, _MISSING) is not value:
            table[key] = value


def _copy(box):
    return dict(box) if isinstance(box, dict) else list(box)


def _same(box, items) -> bool:
    """Whether a container holds the same objects as when copied (identity, in order)."""
    if len(box) != len(items):
        return False
    now = box.values() if isinstance(box, dict) else box
    was = items.values() if isinstance(box, dict) else items
    if isinstance(box, dict) and list(box) != list(items):
        return False
    if isinstance(box, set):
        return box == set(items)
    return all(map(operator.is_, now, was))


def _put_back_container(box, items) -> None:
    if isinstance(box, dict):
        box.clear()
        box.update(items)
    elif isinstance(box, set):
        box.clear()
        box.update(items)
    else:
        box[:] = items


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
    flags: dict = {}
    try:  # raises while the legacy and the new precision API are mixed
        flags["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    except RuntimeError:
        flags["float32_matmul_precision"] = None
    for name in MATMUL:  # after the legacy precision: setting that moves fp32_precision
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
    """Each flag that moved, set back (only those: a setter may warn that it is deprecated),
    in the order `_read_flags` read them, each compared as it stands when its turn comes
    (setting one flag can move another)."""
    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    if _read_flags(torch) == flags:
        return
    for key, value in flags.items():
        if key.endswith("_split_k") or _read_flags(torch).get(key) == value:
            continue
        kind, _, name = key.partition(".")
        if kind == "float32_matmul_precision":
            if value is not None:
                torch.set_float32_matmul_precision(value)
        elif kind == "matmul" and name.endswith("_reduction"):
            setattr(cuda.matmul, name, (value, flags.get(f"{key}_split_k", True)))
        elif kind == "matmul":
            setattr(cuda.matmul, name, value)
        elif kind == "cudnn":
            setattr(cudnn, name, value)
        elif kind == "sdp":
            getattr(cuda, f"enable_{name}_sdp")(value)


def task_modes(device):
    """The thread's modes as a task starts from: inference mode off, gradients on (the task
    then sets its own), autocast off on the CPU and on `device`. A model that enters a mode
    and never leaves it (a context entered in an ExitStack it keeps) would otherwise hand
    the next task a bit it can read, and change how the next model is built."""
    import contextlib

    import torch

    stack = contextlib.ExitStack()
    stack.enter_context(torch.inference_mode(False))
    stack.enter_context(torch.enable_grad())
    for kind in dict.fromkeys(("cpu", device.type)):
        stack.enter_context(torch.autocast(device_type=kind, enabled=False))
    return stack
