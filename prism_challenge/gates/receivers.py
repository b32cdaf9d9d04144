"""Where a class of the bundle and the plain functions of its methods may go.

A method may read `self._x` and `self.__x` (mangled with its class's name) because `self` is
an instance of a class the file defines. That holds only while a method's function cannot be
called with another object as `self`: a function taken out of its class body (by name, by a
decorator that receives it, through the class object held in a variable) and called with the
harness's training context reads that object's private state (a class named like the
harness's own even gets its mangled names), and from there every module, file and frame. So
a class body may not read the names of its own methods (only `@name.setter` and the like), a
method's decorators are `staticmethod`, `property` and library decorators that keep nothing
(no `classmethod`: `cls.method` is the plain function again), and a class
of the file is only called, subclassed, named by `isinstance`/`super`/`except`/annotations,
or has an attribute read (where `Class.method` is refused unless called on `self`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

# decorators a method may have that are builtins (when nothing rebinds them); not
# `classmethod`: its first parameter is the class, whose methods' functions `cls.method`
# hands out (and `return cls` the class itself); a module-level factory does the same job
BUILTIN_DECORATORS = frozenset({"staticmethod", "property"})
PROPERTY_PARTS = frozenset({"setter", "getter", "deleter"})
# what a method's decorator must resolve to when it is neither: these keep nothing
LIBRARY_DECORATORS = frozenset({
    "functools.cached_property", "functools.lru_cache", "functools.cache",
    "abc.abstractmethod", "typing.final", "torch.no_grad", "torch.enable_grad",
    "torch.inference_mode", "torch.autocast", "torch.amp.autocast",
    "torch.amp.custom_fwd", "torch.amp.custom_bwd", "torch.autograd.function.once_differentiable",
    "dataclasses.dataclass",
})


def _class_scope(node: ast.ClassDef) -> Iterator[ast.AST]:
    """The nodes a class body evaluates in its own scope: nested functions and lambdas give
    only their decorators, defaults and annotations; nested classes their bases and
    decorators (their bodies are checked as classes of their own)."""
    todo: list[ast.AST] = list(node.body)
    while todo:
        item = todo.pop()
        yield item
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            args = item.args
            todo += item.decorator_list + args.defaults + [d for d in args.kw_defaults if d]
            todo += [a.annotation for a in args.posonlyargs + args.args + args.kwonlyargs
                     if a.annotation is not None]
            todo += [item.returns] if item.returns is not None else []
        elif isinstance(item, ast.Lambda):
            todo += item.args.defaults + [d for d in item.args.kw_defaults if d]
        elif isinstance(item, ast.ClassDef):
            todo += item.bases + [k.value for k in item.keywords] + item.decorator_list
        else:
            todo += list(ast.iter_child_nodes(item))


def method_name_reads(node: ast.ClassDef) -> Iterator[ast.Name]:
    """Each read, in the class body's own scope, of a name the body binds with `def`, other
    than as `@name.setter` (`.getter`, `.deleter`) on a method."""
    defs = {item.name for item in node.body
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)}
    allowed: set[int] = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in item.decorator_list:
                if (isinstance(deco, ast.Attribute) and deco.attr in PROPERTY_PARTS
                        and isinstance(deco.value, ast.Name)):
                    allowed.add(id(deco.value))
    for sub in _class_scope(node):
        if (isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in defs
                and id(sub) not in allowed):
            yield sub


def keeps_nothing(deco: ast.AST, resolve: Callable[[ast.AST], str | None],
                  rebound: set[str], defs: set[str]) -> bool:
    """Is a decorator one that hands the function it receives to nothing else: a builtin
    descriptor, `@prop.setter` of a property of the same class, or a library decorator
    (called with constants and library names only)?"""
    if isinstance(deco, ast.Name) and deco.id in BUILTIN_DECORATORS:
        return deco.id not in rebound
    if (isinstance(deco, ast.Attribute) and deco.attr in PROPERTY_PARTS
            and isinstance(deco.value, ast.Name) and deco.value.id in defs):
        return True
    call = deco if isinstance(deco, ast.Call) else None
    if resolve(call.func if call else deco) not in LIBRARY_DECORATORS:
        return False
    values = [*call.args, *(k.value for k in call.keywords)] if call else []
    return all(isinstance(v, ast.Constant) or resolve(v) is not None for v in values)


def class_use_ok(node: ast.Name, parents: dict[ast.AST, ast.AST]) -> bool:
    """May this read of a class of the file stand here: called, subclassed, its attribute
    read, the class of `isinstance`/`issubclass`/`super` (alone or in a tuple), an `except`
    clause's class? Anywhere else (a variable, an argument, a container, a return value, a
    decorator's argument) the class would let its methods' functions be taken off it unseen."""
    parent = parents.get(node)
    if isinstance(parent, ast.Tuple):  # isinstance(x, (A, B)), except (A, B):
        node, parent = parent, parents.get(parent)
        if isinstance(parent, ast.ExceptHandler):
            return parent.type is node
        return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
                and parent.func.id in ("isinstance", "issubclass") and node in parent.args)
    if isinstance(parent, ast.Call):
        if parent.func is node:
            return True
        name = parent.func.id if isinstance(parent.func, ast.Name) else None
        return name in ("isinstance", "issubclass", "super") and node in parent.args
    if isinstance(parent, ast.Attribute):
        return parent.value is node
    if isinstance(parent, ast.ClassDef):
        return node in parent.bases
    if isinstance(parent, ast.ExceptHandler):
        return parent.type is node
    return False


def in_annotation(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Is `node` part of an annotation (of a parameter, a return or an annotated name)?"""
    child, up = node, parents.get(node)
    while up is not None:
        if isinstance(up, ast.arg) and up.annotation is child:
            return True
        if isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef) and up.returns is child:
            return True
        if isinstance(up, ast.AnnAssign) and up.annotation is child:
            return True
        if isinstance(up, ast.stmt):
            return False
        child, up = up, parents.get(up)
    return False
