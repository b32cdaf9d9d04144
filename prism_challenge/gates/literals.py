"""Large literals and encoded blobs (docs/security.md B4, A6): knowledge must be learned.

A model's source needs a handful of hyper-parameters, short strings and small tuples;
pretrained weights, token statistics or encoded code do not fit through these limits. The
thresholds sit far above anything an honest model file contains (the honest corpus in
tests/fixtures/honest stays below a tenth of each) and far below what smuggled knowledge
needs. Docstrings and bare string statements are exempt: they are inert because `__doc__`
and every other way of reading them back is refused by the policy.

Names are text too: a module's attribute and parameter names come back at run time as
strings (`named_parameters`, `state_dict` keys, `named_modules`), so a file of long made-up
names would carry what its strings may not. Each name is capped, and so are the distinct
names of a file together, at the same order as its strings.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Iterable

from prism_challenge.gates.rules import BLOB, LITERAL
from prism_challenge.gates.violation import Violation

MAX_STRING_CHARS = 256  # one string constant
MAX_FILE_STRING_CHARS = 4096  # all string constants of a file together
MAX_BYTES = 32  # one bytes constant
MAX_COLLECTION_CONSTANTS = 64  # constants directly inside one list/tuple/set/dict display
MAX_FILE_NUMBERS = 1024  # numeric constants in a file
MAX_INT_BITS = 64  # one integer constant
MAX_NAME_CHARS = 64  # one identifier (the honest corpus: at most 39)
MAX_FILE_NAME_CHARS = 4096  # distinct identifiers of a file together (honest: at most 575)
BLOB_MIN_CHARS = 40  # shortest string inspected for an encoding
BLOB_MIN_ENTROPY = 4.0  # bits per character; identifiers and prose sit well below

_HEX = re.compile(r"[0-9a-fA-F]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/=_-]+")


def _entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def looks_encoded(text: str) -> bool:
    """Hex or base64 of length >= BLOB_MIN_CHARS with the entropy of random data."""
    if len(text) < BLOB_MIN_CHARS:
        return False
    if _HEX.fullmatch(text):
        return True
    return (
        _BASE64.fullmatch(text) is not None
        and any(c.isdigit() for c in text)
        and any(c.isalpha() for c in text)
        and _entropy(text) >= BLOB_MIN_ENTROPY
    )


def literal_violations(nodes: Iterable[ast.AST], file: str) -> list[Violation]:
    """Check every node of a file; `nodes` must list parents before their children."""
    out: list[Violation] = []
    inert: set[int] = set()  # constants that are bare expression statements (docstrings)
    strings: list[tuple[int, int]] = []  # (line, chars)
    numbers: list[int] = []  # lines
    names: dict[str, int] = {}  # distinct identifier -> the line it first appears on
    for node in nodes:
        for name in _names(node):
            names.setdefault(name, getattr(node, "lineno", 1))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            inert.add(id(node.value))
        elif isinstance(node, ast.Constant) and id(node) not in inert:
            _constant(node, file, out, strings, numbers)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            items = node.values if isinstance(node, ast.Dict) else node.elts
            constants = sum(isinstance(_unsign(e), ast.Constant) for e in items)
            if constants > MAX_COLLECTION_CONSTANTS:
                out.append(Violation(LITERAL, file, node.lineno, (
                    f"a literal collection of {constants} constants (limit "
                    f"{MAX_COLLECTION_CONSTANTS}); tables of values must be learned")))
    if sum(chars for _, chars in strings) > MAX_FILE_STRING_CHARS:
        total = 0
        for line, chars in sorted(strings):
            total += chars
            if total > MAX_FILE_STRING_CHARS:
                out.append(Violation(LITERAL, file, line, (
                    f"string constants exceed {MAX_FILE_STRING_CHARS} characters in this "
                    "file; keep strings to names and short messages")))
                break
    out.extend(_name_violations(names, file))
    if len(numbers) > MAX_FILE_NUMBERS:
        out.append(Violation(LITERAL, file, sorted(numbers)[MAX_FILE_NUMBERS], (
            f"more than {MAX_FILE_NUMBERS} numeric constants in this file; weights and "
            "statistics must be learned, not written in")))
    return out


def _names(node: ast.AST) -> tuple[str, ...]:
    """The identifiers a node spells out (names, attributes, definitions, parameters,
    keywords, imports, pattern captures)."""
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Attribute):
        return (node.attr,)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    if isinstance(node, ast.arg):
        return (node.arg,)
    if isinstance(node, ast.keyword):
        return () if node.arg is None else (node.arg,)
    if isinstance(node, ast.alias):
        return tuple(n for n in (node.name, node.asname) if n)
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return tuple(node.names)
    if isinstance(node, ast.ImportFrom):
        return () if node.module is None else (node.module,)
    if isinstance(node, (ast.MatchAs, ast.MatchStar)):
        return () if node.name is None else (node.name,)
    if isinstance(node, ast.MatchMapping):
        return () if node.rest is None else (node.rest,)
    if isinstance(node, ast.MatchClass):
        return tuple(node.kwd_attrs)
    if isinstance(node, ast.ExceptHandler):
        return () if node.name is None else (node.name,)
    return ()


def _name_violations(names: dict[str, int], file: str) -> list[Violation]:
    out = [Violation(LITERAL, file, line, (
        f"a name of {len(name)} characters (limit {MAX_NAME_CHARS}); names come back as "
        "strings at run time (parameter names, state-dict keys), so they must stay short"))
        for name, line in names.items() if len(name) > MAX_NAME_CHARS][:5]
    total = 0
    for name, line in sorted(names.items(), key=lambda kv: kv[1]):
        total += len(name)
        if total > MAX_FILE_NAME_CHARS:
            out.append(Violation(LITERAL, file, line, (
                f"the distinct names of this file exceed {MAX_FILE_NAME_CHARS} characters "
                "together; names come back as strings at run time, so they cannot carry "
                "what string constants may not")))
            break
    return out


def _constant(node: ast.Constant, file: str, out: list[Violation],
              strings: list[tuple[int, int]], numbers: list[int]) -> None:
    value = node.value
    if isinstance(value, str):
        strings.append((node.lineno, len(value)))
        if len(value) > MAX_STRING_CHARS:
            out.append(Violation(LITERAL, file, node.lineno, (
                f"string constant of {len(value)} characters (limit {MAX_STRING_CHARS}); "
                "knowledge must be learned, not embedded")))
        elif looks_encoded(value):
            out.append(Violation(BLOB, file, node.lineno, (
                "string constant looks like hex/base64-encoded data; encoded blobs are "
                "refused, write the code or learn the values")))
    elif isinstance(value, bytes):
        if len(value) > MAX_BYTES:
            out.append(Violation(BLOB, file, node.lineno, (
                f"bytes constant of {len(value)} bytes (limit {MAX_BYTES}); embedded binary "
                "data is refused")))
    elif isinstance(value, (int, float, complex)) and not isinstance(value, bool):
        numbers.append(node.lineno)
        if isinstance(value, int) and abs(value).bit_length() > MAX_INT_BITS:
            out.append(Violation(BLOB, file, node.lineno, (
                f"integer constant of {abs(value).bit_length()} bits (limit {MAX_INT_BITS}); "
                "large integers can encode data")))


def _unsign(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return node
