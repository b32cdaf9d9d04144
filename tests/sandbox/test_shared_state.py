"""What outlives a model in the evaluation process is put back before every build
(sandbox/harness/shared_state.py), in this test process: each write a bundle can make
through an allowed name, and the list of modules it walks against the AST policy's."""

from __future__ import annotations

import gc
import logging
import warnings

import pytest

torch = pytest.importorskip("torch")

from prism_challenge.gates.allowlist import PATHS  # noqa: E402
from prism_challenge.sandbox.harness.shared_state import MODULES, SharedState  # noqa: E402


def test_the_walked_modules_are_the_ones_a_bundle_may_import():
    assert set(MODULES) == {k for k, v in PATHS.items() if isinstance(v, frozenset)}


@pytest.fixture
def shared():
    state = SharedState()
    yield state
    state.restore()
    gc.unfreeze()  # restore() freezes what lives on: this process goes on testing


def test_every_write_through_an_allowed_name_is_put_back(shared):
    from torch import nn
    from torch.nn.attention import SDPBackend, sdpa_kernel

    holder = nn.Identity
    holder.prism_seen = [1, 2]
    module = nn.Module
    module.dump_patches = not module.dump_patches
    init = torch.nn.init.xavier_uniform_
    init.prism_seen = 3
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    matmul.allow_tf32 = not before
    held = sdpa_kernel([SDPBackend.MATH])
    held.__enter__()
    warnings.filterwarnings("error", message="prism-seen-7")
    shared.restore()
    assert not hasattr(nn.Identity, "prism_seen") and not hasattr(init, "prism_seen")
    assert nn.Module.dump_patches is False
    assert matmul.allow_tf32 == before
    assert torch.backends.cuda.flash_sdp_enabled()
    assert warnings.filters == shared.filters


def test_a_clean_process_is_left_as_it_is(shared):
    from torch import nn

    forward = nn.Linear.forward
    shared.restore()
    assert nn.Linear.forward is forward and not shared.changed()


def test_what_hangs_off_a_class_or_an_object_is_put_back_too(shared):
    """Objects a class attribute leads to that are neither classes nor functions (a
    TypeVar, the function behind a staticmethod, an enum member), replaced values of an
    object's public attributes, and entries of a public list or dict: each could carry
    what one task saw into the next."""
    import enum

    from torch import nn
    from torch.utils.checkpoint import CheckpointPolicy

    nn.Module.T_destination.prism_memo = {"seen": [1]}
    torch.autograd.Function.forward.prism_memo = [2]
    CheckpointPolicy.MUST_SAVE.prism_memo = 3
    enum.FlagBoundary.STRICT.prism_memo = 4
    torch.special.common_args["prism_memo"] = "5"
    notes = torch.nn.functional.tf32_notes
    first = next(iter(notes))
    kept = notes[first]
    notes[first] = "6"
    torch.utils.checkpoint.SAC_IGNORED_OPS.add("prism-7")
    logger = next(t for t in shared.tables if "propagate" in t and t.get("level") == 0)
    logger["level"] = 50
    quiet = [lg for lg in logging.Logger.manager.loggerDict.values()
             if isinstance(lg, logging.Logger) and lg.__dict__ is logger]
    assert quiet and not quiet[0].isEnabledFor(30)
    held = [lock for lock in shared.locks if lock.acquire(blocking=False)]
    assert held and all("count=1" in repr(lock) for lock in held)
    assert shared.changed()
    shared.restore()
    assert all("unlocked" in repr(lock) for lock in held)
    assert logger["level"] == 0 and quiet[0].isEnabledFor(30) == quiet[0].parent.isEnabledFor(30)
    assert not hasattr(nn.Module.T_destination, "prism_memo")
    assert not hasattr(torch.autograd.Function.forward, "prism_memo")
    assert not hasattr(CheckpointPolicy.MUST_SAVE, "prism_memo")
    assert not hasattr(enum.FlagBoundary.STRICT, "prism_memo")
    assert "prism_memo" not in torch.special.common_args
    assert notes[first] is kept
    assert "prism-7" not in torch.utils.checkpoint.SAC_IGNORED_OPS
    assert not shared.changed()


def test_a_wrapped_module_and_every_matmul_setting_are_put_back(shared):
    """torch.backends.cudnn is a module object whose table holds only the real module (every
    other name is forwarded), so what its functions hold was not walked; and the cuBLAS
    settings reachable through `matmul` include the new precision API, whose setting
    torch refuses to read back mixed with the legacy one."""
    matmul = torch.backends.cuda.matmul
    names = ("allow_fp16_accumulation", "allow_tf32", "fp32_precision")
    before = [getattr(matmul, n) for n in names] + [torch.get_float32_matmul_precision()]
    torch.backends.cudnn.is_available.prism_memo = {"seen": [1]}
    matmul.allow_fp16_accumulation = not matmul.allow_fp16_accumulation
    matmul.allow_tf32 = not matmul.allow_tf32
    matmul.fp32_precision = "tf32" if matmul.fp32_precision != "tf32" else "ieee"
    assert matmul.fp32_precision != before[2]
    shared.restore()
    assert not hasattr(torch.backends.cudnn.is_available, "prism_memo")
    assert [getattr(matmul, n) for n in names] + [torch.get_float32_matmul_precision()] == before


def _public_names(obj) -> list:
    try:
        return [k for k in dir(obj) if not k.startswith("_")]
    except Exception:
        return []


def test_nothing_a_bundle_can_reach_by_name_is_left_out_of_the_walk(shared):
    """What a bundle reaches is what `getattr` chains from the allow-listed names give (the
    walk reads tables instead): every object on such a chain that takes new attributes has
    its table in the snapshot, and every list, dict or set on one is tracked."""
    import importlib
    import types

    from prism_challenge.gates.allowlist import PATHS

    tables = {id(t) for t in shared.tables}
    boxes = {id(b) for b in shared.containers}
    todo, seen, missed = [], set(), []
    for name, members in PATHS.items():
        if isinstance(members, frozenset):
            module = importlib.import_module(name)
            todo += [(f"{name}.{k}", getattr(module, k)) for k in members if hasattr(module, k)]
    while todo:
        path, obj = todo.pop()
        if id(obj) in seen or type(obj) in (int, float, complex, str, bytes, bool, type(None)):
            continue
        seen.add(id(obj))
        if isinstance(obj, types.ModuleType) or path.count(".") > 8:
            continue
        if type(obj) in (list, dict, set, bytearray) and id(obj) not in boxes:
            missed.append(path)
        if isinstance(obj, list | tuple | set | frozenset | dict):
            todo += [(f"{path}[]", v) for v in (obj.values() if isinstance(obj, dict) else obj)]
            continue
        try:
            table = object.__getattribute__(obj, "__dict__")
        except (AttributeError, TypeError):
            table = None
        if not isinstance(obj, type) and isinstance(table, dict) and id(table) not in tables:
            try:
                obj.prism_probe = 1
                del obj.prism_probe
                missed.append(path)
            except (AttributeError, TypeError):
                pass
        for key in _public_names(obj):
            try:
                value = getattr(obj, key)
            except Exception:
                continue
            if not isinstance(value, types.MethodType | types.BuiltinMethodType) \
                    or isinstance(obj, type):
                todo.append((f"{path}.{key}", value))
    assert len(seen) > 1000 and missed == []


def test_a_torch_warning_given_once_is_given_again_after_a_restore(shared):
    """A warn-once site in torch's C++ (here `.T` on a 3-d tensor) would be a bit set for the
    process's life: warned in one task, silent in the next."""
    was = torch.is_warn_always_enabled()
    try:
        shared.restore()
        for _ in range(2):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                _ = torch.zeros(2, 2, 2).T
            assert any(".T" in str(w.message) for w in seen)
    finally:
        torch.set_warn_always(was)


def test_every_memo_cache_is_emptied_even_one_made_by_a_later_import(shared):
    """A key left in a memo cache is found again with a clock (`typing.Literal[key]` comes
    ~15 times faster from typing's cache): each cache in the process starts every build
    empty, the caches behind closures and those of modules imported after the snapshot too."""
    import functools
    import sys
    import types
    import typing

    typing.Literal[("prism-memo", 7)]
    later = types.ModuleType("prism_late_module")
    later.lookup = functools.lru_cache(maxsize=None)(lambda key: key)
    sys.modules[later.__name__] = later
    try:
        later.lookup("prism-memo")
        assert later.lookup.cache_info().currsize == 1
        shared.restore()
        assert later.lookup.cache_info().currsize == 0
        gc.unfreeze()
        caches = [o for o in gc.get_objects() if type(o) is functools._lru_cache_wrapper]
        assert len(caches) > 100 and all(c.cache_info().currsize == 0 for c in caches)
    finally:
        del sys.modules[later.__name__]


def test_the_caches_of_abstract_classes_start_every_build_empty(shared):
    """`isinstance(0, Sized)` is answered from the ABC's cache once asked (~5 times faster):
    a bit per pair of an ABC and a type that outlives the task, read with a clock."""
    import abc
    import collections.abc

    isinstance(0, collections.abc.Sized)
    isinstance([], collections.abc.Sized)
    assert abc._get_dump(collections.abc.Sized)[1] or abc._get_dump(collections.abc.Sized)[2]
    shared.restore()
    _, cache, negative, _ = abc._get_dump(collections.abc.Sized)
    assert not cache and not negative


def _free_tuples(size: int) -> int:
    """How many freed tuples of `size` items the interpreter keeps for reuse (its own
    allocator statistics, written to the C stderr)."""
    import os
    import re
    import sys
    import tempfile

    with tempfile.TemporaryFile() as out:
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        stats = out.read().decode()
    return int(re.search(rf"(\d+) free {size}-sized PyTupleObjects", stats)[1])


def test_the_free_lists_are_emptied_and_what_lives_on_is_frozen(shared):
    """A task sets the order of a free list by what it frees (tuples of a length, here) and
    the next reads it from the addresses it is handed (a red team carried thousands of bits
    a task so): restore() empties every free list with a full collection, then freezes what
    lives on, so the next collection walks only what one task made."""
    made = [tuple(range(12)) for _ in range(8)]
    for i in (2, 0, 3, 1, 5, 4, 7, 6):  # freed in a chosen order
        made[i] = None
    assert _free_tuples(12) >= 8
    shared.restore()
    assert _free_tuples(12) == 0
    assert gc.get_freeze_count() > 10_000 and len(gc.get_objects()) < 10_000
