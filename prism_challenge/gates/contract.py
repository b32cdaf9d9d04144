"""The miner contract of docs/miners.md, checked statically before anything runs.

`architecture.py` must define a top-level `def build_model(ctx)` and `training.py` a
top-level `def train(ctx)`: plain (not async) functions callable with exactly one
positional argument, because the harness calls them exactly so.
"""

from __future__ import annotations

import ast

from prism_challenge.gates.rules import CONTRACT
from prism_challenge.gates.violation import Violation

ENTRY_POINTS = {"architecture.py": "build_model", "training.py": "train"}


def contract_violations(trees: dict[str, ast.Module]) -> list[Violation]:
    """`trees` maps each parsed script name to its module; missing scripts are reported."""
    out: list[Violation] = []
    for file, func in ENTRY_POINTS.items():
        tree = trees.get(file)
        if tree is None:
            continue  # reported by the caller (missing or unparsable)
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name == func]
        if not defs:
            out.append(Violation(CONTRACT, file, 1, (
                f"{file} must define a top-level function `def {func}(ctx):`")))
            continue
        node = defs[-1]
        if isinstance(node, ast.AsyncFunctionDef):
            out.append(Violation(CONTRACT, file, node.lineno, (
                f"`{func}` must be a plain function, not `async def`")))
            continue
        args = node.args
        positional = args.posonlyargs + args.args
        required = len(positional) - len(args.defaults)
        kw_required = [a for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                       if d is None]
        callable_with_one = required <= 1 and (len(positional) >= 1 or args.vararg)
        if not callable_with_one or kw_required:
            out.append(Violation(CONTRACT, file, node.lineno, (
                f"`{func}` must take exactly one argument, the harness's ctx: "
                f"`def {func}(ctx):`")))
    return out
