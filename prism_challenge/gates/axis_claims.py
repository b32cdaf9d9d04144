"""Declared axes read against the code before anything runs.

A bundle's `prism.toml [axes]` is the miner's own description of its design (the registry
credits evidence to it). The measured axes (optimizer, precision, compile) are also read
from the run, where a contradiction is flagged after the fact; this check catches the plain
cases before the run: a declared value whose evidence appears nowhere in the code (declares
`optimizer = "adamw"` and constructs NAdam, declares `precision = "bf16"` and never names
bfloat16). It only looks for names the code must contain, so it never refuses anything: a
contradiction is a flag with its fix (the measured value wins anyway, and the declared one
is ignored), shown by `prism check`, `prism eval` and on the validator's submission page.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

# Declared value -> identifiers (attribute or name, or a string literal) of which at least
# one must appear in the bundle's code. Compared case-insensitively as whole identifiers,
# except "contains" entries, matched as substrings (a miner's own `MuonOptimizer` class).
_EVIDENCE: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    # axis -> value -> (exact identifiers, substrings)
    "optimizer": {
        "adamw": (("adamw",), ()),
        "adam": (("adam",), ()),
        "sgd": (("sgd",), ()),
        "adafactor": (("adafactor",), ()),
        "muon": ((), ("muon",)),
        "lion": ((), ("lion",)),
    },
    "precision": {
        "bf16": (("bfloat16", "bf16"), ()),
        "fp16": (("float16", "half", "fp16"), ()),
    },
    "compile": {"true": (("compile",), ())},
    "norm": {
        "layernorm": (("layernorm", "layer_norm"), ()),
        "rmsnorm": (("rms_norm",), ("rmsnorm",)),
    },
    "position": {
        "rope": ((), ("rope", "rotary")),
        "alibi": ((), ("alibi",)),
    },
}

_FIX = {
    "optimizer": "construct that optimiser in train(ctx), or declare the one you construct",
    "precision": "pass autocast_dtype=torch.{dtype} to ctx.batches (or torch.autocast), or "
                 "declare precision = \"fp32\"",
    "compile": "pass compile=True to ctx.batches, or declare compile = \"false\"",
    "norm": "use that normalisation layer, or declare the one the model uses",
    "position": "use that position encoding, or declare the one the model uses",
}
_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}


def _identifiers(files: Mapping[str, str | bytes]) -> set[str]:
    """Every name, attribute, keyword, function/class name and short string literal."""
    found: set[str] = set()
    for name, source in files.items():
        if not name.endswith(".py"):
            continue
        text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue  # the policy reports it
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                found.add(node.arg)
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                found.add(node.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and len(node.value) <= 40:
                found.add(node.value)
    return {f.lower() for f in found}


def axis_contradictions(files: Mapping[str, str | bytes],
                        declared: Mapping[str, object]) -> list[str]:
    """One line per declared axis the code contradicts, each with its fix; [] when none.

    Only declared values with a known piece of evidence are checked ("other", "none",
    "fp32", "learned" and numbers are not)."""
    wanted = {axis: str(value).lower() for axis, value in declared.items()
              if axis in _EVIDENCE and str(value).lower() in _EVIDENCE[axis]}
    if not wanted:
        return []
    seen = _identifiers(files)
    out = []
    for axis, value in sorted(wanted.items()):
        exact, contains = _EVIDENCE[axis][value]
        if seen & set(exact) or any(c in s for c in contains for s in seen):
            continue
        names = ", ".join(exact + contains)
        fix = _FIX[axis].format(dtype=_DTYPE.get(value, value))
        out.append(f"declared axis {axis} = \"{value}\" but the code never names {names}: "
                   f"{fix} (until then the declared value is ignored)")
    return out
