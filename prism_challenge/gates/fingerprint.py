"""A rename-invariant fingerprint of a bundle's code, for near-duplicate detection (B7).

Each script is parsed and every statement becomes a unit: the pre-order sequence of its
AST node types, with user-chosen names (variables, arguments, functions, classes, own
attributes) replaced by placeholders, imported names replaced by their resolved dotted
path (so `import torch.nn.functional as F` and `as fn` agree), constants replaced by their
type, and docstrings dropped. Compound statements contribute their header only; their
bodies are units of their own. The fingerprint is the set of hashed k-shingles of all
units, so renaming, comments, formatting, literal tweaks and statement or method
reordering leave it unchanged, while a changed computation changes the shingles it
touches. Similarity is the Jaccard index of two such sets.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

SHINGLE = 4
_BUILTINS = frozenset(dir(builtins))
_COMPOUND = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While,
    ast.If, ast.With, ast.AsyncWith, ast.Try, ast.TryStar, ast.Match,
)
_BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(frozen=True)
class Fingerprint:
    shingles: frozenset[int]
    exact: str  # sha256 of the sorted normalised units: equal iff identical after normalising

    def similarity(self, other: Fingerprint) -> float:
        if not self.shingles and not other.shingles:
            return 1.0
        inter = len(self.shingles & other.shingles)
        return inter / (len(self.shingles) + len(other.shingles) - inter)


def fingerprint(files: Mapping[str, str | bytes]) -> Fingerprint:
    """The fingerprint of a bundle's Python scripts (which must parse: gate 1 ran first)."""
    shingles: set[int] = set()
    units: list[str] = []
    for name in sorted(files):
        if not name.endswith(".py"):
            continue
        source = files[name]
        text = source.decode("utf-8") if isinstance(source, bytes) else source
        for unit in _Normaliser(ast.parse(text)).units():
            tokens = [name, *unit]
            units.append("\x1f".join(tokens))
            if len(tokens) <= SHINGLE:
                shingles.add(_hash(tokens))
            else:
                for i in range(len(tokens) - SHINGLE + 1):
                    shingles.add(_hash([name, *tokens[i : i + SHINGLE]]))
    exact = hashlib.sha256("\x1e".join(sorted(units)).encode()).hexdigest()
    return Fingerprint(frozenset(shingles), exact)


def _hash(tokens: list[str]) -> int:
    digest = hashlib.blake2b("\x1f".join(tokens).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)  # fits a signed 64-bit column


class _Normaliser:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.imports: dict[str, str] = {}
        self.user: set[str] = set()  # names and attribute names the author chose
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imports[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    self.imports[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.user.add(node.name)
            elif isinstance(node, ast.arg):
                self.user.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.user.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                self.user.add(node.attr)

    def units(self) -> Iterator[list[str]]:
        yield from self._statements(self.tree.body)

    def _statements(self, body: list[ast.stmt]) -> Iterator[list[str]]:
        for stmt in body:
            if _is_docstring(stmt):
                continue
            tokens: list[str] = []
            self._emit(stmt, tokens, top=True)
            yield tokens
            if isinstance(stmt, _COMPOUND):
                for field in _BODY_FIELDS:
                    for child in getattr(stmt, field, None) or []:
                        if isinstance(child, ast.ExceptHandler):
                            yield ["except", *self._header(child)]
                            yield from self._statements(child.body)
                        elif isinstance(child, ast.match_case):
                            yield from self._statements(child.body)
                        else:
                            yield from self._statements([child])

    def _header(self, node: ast.AST) -> list[str]:
        tokens: list[str] = []
        self._emit(node, tokens, top=True)
        return tokens

    def _emit(self, node: ast.AST, out: list[str], *, top: bool = False) -> None:
        if isinstance(node, ast.Name):
            out.append(self._name(node.id))
            return
        if isinstance(node, ast.Attribute):
            path = self._path(node)
            if path is not None:
                out.append(path)
                return
            self._emit(node.value, out)
            out.append("." + ("ATTR" if node.attr in self.user else node.attr))
            return
        if isinstance(node, ast.Constant):
            out.append(type(node.value).__name__ if not isinstance(node.value, bool | None)
                       else repr(node.value))
            return
        if isinstance(node, ast.keyword):
            out.append("kw=" + ("ID" if node.arg in self.user else str(node.arg)))
            self._emit(node.value, out)
            return
        if isinstance(node, (ast.arg, ast.alias)):
            return
        out.append(type(node).__name__)
        for field, value in ast.iter_fields(node):
            if top and isinstance(node, _COMPOUND) and field in _BODY_FIELDS:
                continue
            if field in ("decorator_list", "type_comment", "ctx"):
                continue
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self._emit(item, out)
            elif isinstance(value, ast.AST):
                self._emit(value, out)

    def _name(self, name: str) -> str:
        if name in self.imports:
            return self.imports[name]
        if name in _BUILTINS and name not in self.user:
            return name
        return "ID"

    def _path(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.imports.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._path(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
        stmt.value.value, str)
