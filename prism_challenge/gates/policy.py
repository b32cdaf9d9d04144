"""The AST policy: a static allow-list over a bundle's Python source (docs/security.md A6, B2,
B7, B8).

`check_policy` parses each script and walks it once. Imported names are resolved to their
dotted path (`F.cross_entropy` -> `torch.nn.functional.cross_entropy`) and looked up in
`allowlist.PATHS`, which lists every usable module and member; modules may only be used as
`module.name`, so no alias can hide a refused one. Everything else is a syntactic ban with a
reason (`rules`): format strings that reach attributes, special methods and nn.Module's
machinery defined or assigned by the bundle, introspection, monkeypatching. A rejection here
is final: the LLM reviewer only ever sees code this policy already allowed.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator, Mapping

from prism_challenge.gates import allowlist as A
from prism_challenge.gates import receivers
from prism_challenge.gates import rules as R
from prism_challenge.gates.contract import ENTRY_POINTS, contract_violations
from prism_challenge.gates.formats import format_string_problem
from prism_challenge.gates.literals import literal_violations
from prism_challenge.gates.surface import is_module, protected_names
from prism_challenge.gates.violation import Violation

_ATTR_BUILTINS = {"getattr", "hasattr", "setattr", "delattr"}
_BUILTIN_NAMES = frozenset(dir(builtins))
_FORMAT_METHODS = frozenset({"format", "format_map"})
# Deepest AST honest code needs is ~20; the bound keeps every later recursive walk (the
# fingerprint) far from Python's recursion limit.
MAX_DEPTH = 100
_SELF = frozenset({"self", "cls"})
# Refused builtins PyTorch code commonly uses as a parameter name: allowed where they name one.
_PARAM_OK = frozenset({"input"})
# Attribute names a bundle may define itself (a model's own `decode` method, say).
_OWNABLE = frozenset({"decode", "new"})


def check_policy(files: Mapping[str, str | bytes]) -> list[Violation]:
    """Every violation of the AST policy and the contract in a bundle's scripts, sorted.

    `files` maps file names to source (text or UTF-8 bytes); non-Python files such as
    `prism.toml` are ignored. An empty list means the bundle may go on to the next gate.
    """
    out: list[Violation] = []
    trees: dict[str, ast.Module] = {}
    for name in sorted(files):
        if not name.endswith(".py"):
            continue
        if name not in ENTRY_POINTS:
            out.append(Violation(R.CONTRACT, name, 1, (
                "a bundle holds architecture.py and training.py only; move this code into "
                "one of them")))
        tree = _parse(name, files[name], out)
        if tree is not None:
            trees[name] = tree
            out.extend(_FileChecker(name, tree).run())
    for name in ENTRY_POINTS:
        if name not in files:
            out.append(Violation(R.CONTRACT, name, 0, f"the bundle has no {name}"))
    out.extend(contract_violations(trees))
    return _one_per_violation(sorted(set(out), key=Violation.sort_key))


def _subject(v: Violation) -> str | None:
    """The quoted name a violation starts with ('.manual_seed' is not allowed...)."""
    if not v.message.startswith("'"):
        return None
    end = v.message.find("'", 1)
    return v.message[1:end] if end > 1 else None


def _one_per_violation(violations: list[Violation]) -> list[Violation]:
    """Drop a report an equal one subsumes: the same rule on the same line, once as the
    attribute ('.manual_seed') and once resolved through its import ('torch.manual_seed').
    Only duplicate text goes: the resolved report stays, so nothing refused is let through."""
    subjects = {}
    for v in violations:
        if (s := _subject(v)) is not None:
            subjects.setdefault((v.file, v.line, v.rule), set()).add(s)
    out = []
    for v in violations:
        s = _subject(v)
        same = subjects.get((v.file, v.line, v.rule), set())
        if s is not None and s.startswith(".") and any(
                o != s and o.endswith(s) for o in same):
            continue
        out.append(v)
    return out


def _parse(name: str, source: str | bytes, out: list[Violation]) -> ast.Module | None:
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            out.append(Violation(R.SYNTAX, name, 0, f"not valid UTF-8 ({exc.reason})"))
            return None
    try:
        return ast.parse(source, filename=name)
    except SyntaxError as exc:
        out.append(Violation(R.SYNTAX, name, exc.lineno or 0, f"not valid Python: {exc.msg}"))
    except ValueError as exc:  # e.g. NUL bytes
        out.append(Violation(R.SYNTAX, name, 0, f"not valid Python: {exc}"))
    except (RecursionError, MemoryError):
        out.append(Violation(R.SYNTAX, name, 0, (
            "too deeply nested for the Python parser; split the expression")))
    return None


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not _is_dunder(name)


class _FileChecker:
    """One traversal of one file; collects violations instead of raising."""

    def __init__(self, file: str, tree: ast.Module) -> None:
        self.file = file
        self.tree = tree
        self.out: list[Violation] = []
        self.parent: dict[ast.AST, ast.AST] = {}
        self.imports: dict[str, str] = {}  # bound name -> dotted path
        self.module_names: set[str] = set()  # bound names that are modules
        self.ctx_names: set[str] = set(R.CTX_NAMES)
        self.defined: set[str] = set()  # names of functions the file defines
        self.classes: set[str] = set()  # names of classes the file defines
        self.methods: set[str] = set()  # instance-method names of those classes
        self.rebound: set[str] = set()  # names assigned anywhere (variables, parameters)

    # --- set-up ---------------------------------------------------------------------
    def run(self) -> list[Violation]:
        # One traversal (parents before children) shared by every check below.
        nodes: list[ast.AST] = []
        stack: list[tuple[ast.AST, int]] = [(self.tree, 0)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_DEPTH:
                while not hasattr(node, "lineno") and node in self.parent:
                    node = self.parent[node]
                self.flag(node, R.SYNTAX, (
                    f"code nested more than {MAX_DEPTH} levels deep; split the expression"))
                return self.out  # nothing deeper is checked, and the bundle is refused
            nodes.append(node)
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
                stack.append((child, depth + 1))
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self._bind(alias.asname, alias.name, module=True)
                    else:
                        root = alias.name.split(".")[0]
                        self._bind(root, root, module=True)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    path = f"{node.module}.{alias.name}"
                    module = not isinstance(A.lookup(path), tuple) and _is_module(path)
                    self._bind(alias.asname or alias.name, path, module=module)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defined.add(node.name)
            elif isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (
                        _decorated(item, "staticmethod") or _decorated(item, "classmethod")
                    ):
                        self.methods.add(item.name)
        self.rebound = {n.id for n in nodes if isinstance(n, ast.Name)
                        and isinstance(n.ctx, ast.Store)} | {
                            n.arg for n in nodes if isinstance(n, ast.arg)}
        self._collect_ctx_aliases([n for n in nodes if isinstance(n, ast.Assign)])
        for node in nodes:
            visit = getattr(self, "visit_" + type(node).__name__, None)
            if visit is not None:
                visit(node)
        self.out.extend(literal_violations(nodes, self.file))
        return self.out

    def _bind(self, name: str, path: str, *, module: bool) -> None:
        self.imports[name] = path
        if module:
            self.module_names.add(name)

    def _collect_ctx_aliases(self, assigns: list[ast.Assign]) -> None:
        # The harness's ctx is the first parameter of the entry points; names bound to
        # plain attribute chains of it (`model = ctx.model`) are the harness's objects too.
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in ENTRY_POINTS.values():
                params = node.args.posonlyargs + node.args.args
                if params:
                    self.ctx_names.add(params[0].arg)
        changed = True
        while changed:
            changed = False
            for node in assigns:
                root = _chain_root(node.value, calls=False)
                if root is None or root not in self.ctx_names:
                    continue
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in self.ctx_names:
                        self.ctx_names.add(target.id)
                        changed = True

    def _autograd_ctx(self, target: ast.AST, root: str) -> bool:
        """`ctx.<name> = ...` on the first parameter of a torch.autograd.Function's
        forward/backward: torch's per-call FunctionCtx, not the harness's. Only one public
        attribute deep; the harness's TrainContext refuses attribute assignment at run time,
        so handing it to such a method (`Fn.forward(ctx, x)`) changes nothing either."""
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == root and not target.attr.startswith("_")):
            return False
        node = self.parent.get(target)
        while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = self.parent.get(node)
        if node is None or node.name not in _AUTOGRAD_METHODS:
            return False
        params = node.args.posonlyargs + node.args.args
        cls = self.parent.get(node)
        return (bool(params) and params[0].arg == root and _decorated(node, "staticmethod")
                and isinstance(cls, ast.ClassDef)
                and any(self.resolve(b) in _AUTOGRAD_BASES for b in cls.bases))

    # --- helpers --------------------------------------------------------------------
    def flag(self, node: ast.AST, rule: str, message: str) -> None:
        self.out.append(Violation(rule, self.file, getattr(node, "lineno", 0), message))

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted path an expression names through imports, or None."""
        if isinstance(node, ast.Name):
            return self.imports.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def check_path(self, node: ast.AST, path: str, *, importing: bool) -> None:
        verdict = A.lookup(path)
        if verdict is None:
            if self.file == "architecture.py":
                verdict = R.ARCHITECTURE_PATHS.get(path)
            if verdict is None:
                return
        if verdict is False:
            if importing:
                self.flag(node, R.IMPORT, (
                    f"import of '{path}' is not allowed ({A.import_why(path)}); the modules "
                    "a bundle may import are listed in docs/gates.md, \"The allow-list, and "
                    "why\""))
            return  # a name from a refused import: the import is what gets reported
        rule, why = verdict
        if rule == R.MEMBER and any(_is_private(p) or _is_dunder(p) for p in path.split(".")):
            return  # reported as private or introspection, which says more
        self.flag(node, rule, f"'{path}' is not allowed: {why}")

    def _is_attribute_base(self, node: ast.AST) -> bool:
        parent = self.parent.get(node)
        return isinstance(parent, ast.Attribute) and parent.value is node

    def _is_attr_builtin_base(self, node: ast.AST) -> bool:
        # getattr(torch, "x") is resolved like torch.x; a call that would return a module
        # is refused by `_check_attr_builtin`, so the module is not leaked.
        parent = self.parent.get(node)
        return (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in _ATTR_BUILTINS
            and bool(parent.args)
            and parent.args[0] is node
        )

    def _check_attr_name(self, node: ast.AST, base: ast.AST | None, attr: str) -> None:
        base_name = base.id if isinstance(base, ast.Name) else None
        if _is_dunder(attr):
            if attr in ("__torch_function__", "__torch_dispatch__"):
                self.flag(node, R.DISPATCH, f"'{attr}' overrides intercept the harness's ops")
            elif attr not in R.DUNDER_ATTRIBUTES:
                self.flag(node, R.INTROSPECT, (
                    f"'.{attr}' is introspection; only super().__init__(...) may use a "
                    "double-underscore attribute"))
        elif _is_private(attr) and _mangled_owner(attr) not in (None, *self.classes):
            self.flag(node, R.PRIVATE, (
                f"'.{attr}' is the private attribute of another class "
                f"('{_mangled_owner(attr)}'); use only public APIs"))
        elif _is_private(attr) and attr in R.HARNESS_NAMES:
            self.flag(node, R.PRIVATE, (
                f"'.{attr}' is nn.Module's private machinery (its hook tables, registries "
                "and snapshot helpers), which the harness relies on; use the public API "
                "(register_buffer, parameters(), ...)"))
        elif _is_private(attr) and base_name not in _SELF:
            self.flag(node, R.PRIVATE, (
                f"'.{attr}' is private to its owner; use only public APIs (private "
                "attributes are allowed on self)"))
        if attr in R.ATTRIBUTES and not (attr in _OWNABLE and attr in self.defined):
            rule, why = R.ATTRIBUTES[attr]
            self.flag(node, rule, f"'.{attr}' is not allowed: {why}")

    # --- visitors -------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_import_path(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            self.flag(node, R.IMPORT, (
                "relative imports are not allowed; a bundle's scripts are loaded "
                "separately, share nothing but ctx.model"))
            return
        for alias in node.names:
            if alias.name == "*":
                self.flag(node, R.IMPORT, f"'from {node.module} import *' hides what is "
                          "used; import names explicitly")
                continue
            self._check_import_path(node, f"{node.module}.{alias.name}")

    def _check_bound_name(self, node: ast.AST, name: str | None) -> None:
        if name in _SELF:
            self.flag(node, R.SELF, f"'{name}' may not be rebound; it is a method's receiver")

    def visit_alias(self, node: ast.alias) -> None:
        self._check_bound_name(node, node.asname)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self._check_bound_name(node, node.name)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        # `case object(_secret=x)` reads attributes by name with no Attribute node.
        for attr in node.kwd_attrs:
            self._check_attr_name(node, None, attr)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        self._check_bound_name(node, node.name)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        self._check_bound_name(node, node.name)

    def _check_import_path(self, node: ast.AST, path: str) -> None:
        verdict = A.lookup(path)
        if isinstance(verdict, tuple) and verdict[0] != R.MEMBER:  # a named denial says most
            self.check_path(node, path, importing=True)
            return
        parts = path.split(".")
        for part in parts[1:]:
            if _is_dunder(part):
                self.flag(node, R.INTROSPECT, f"'{path}' reaches interpreter internals")
                return
            if _is_private(part):
                self.flag(node, R.PRIVATE, f"'{path}' is private; use only public APIs")
                return
        self.check_path(node, path, importing=True)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in _SELF and not isinstance(node.ctx, ast.Load):
            self.flag(node, R.SELF, f"'{name}' may not be rebound; it is a method's receiver")
        if name in R.BUILTINS and not (name in _PARAM_OK and self._a_parameter(node)):
            rule, why = R.BUILTINS[name]
            self.flag(node, rule, f"'{name}' is not allowed: {why}")
        elif name == "type":
            self.flag(node, R.INTROSPECT, "'type' is introspection; use isinstance(...)")
        elif name in _ATTR_BUILTINS:
            parent = self.parent.get(node)
            if not (isinstance(parent, ast.Call) and parent.func is node):
                self.flag(node, R.DYNAMIC, f"'{name}' may only be called directly with a "
                          "literal attribute name")
        elif _is_dunder(name) and name not in R.DUNDER_NAMES:
            if name in R.DUNDER_DEFS and R.DUNDER_DEFS[name][0] == R.DISPATCH:
                self.flag(node, R.DISPATCH, f"'{name}' overrides intercept the harness's ops")
            else:
                self.flag(node, R.INTROSPECT, f"'{name}' is interpreter internals")
        if (name in self.classes and isinstance(node.ctx, ast.Load)
                and not receivers.class_use_ok(node, self.parent)
                and not receivers.in_annotation(node, self.parent)):
            self.flag(node, R.SELF, (
                f"the class '{name}' may only be called, subclassed, named in isinstance, "
                "super or except, or have an attribute read: held elsewhere, its methods' "
                "functions could be taken off it and called with any object as self"))
        if name in self.module_names and not (
            self._is_attribute_base(node) or self._is_attr_builtin_base(node)
        ):
            self.flag(node, R.MODULE_ALIAS, (
                f"the module '{self.imports[name]}' may only be used as "
                f"{name}.<name>, not passed around or rebound"))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._check_attr_name(node, node.value, node.attr)
        if node.attr in _FORMAT_METHODS:
            self._check_format(node, node.value, node.attr)
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.classes and node.attr in self.methods:
            parent = self.parent.get(node)
            direct = (
                isinstance(parent, ast.Call) and parent.func is node and parent.args
                and isinstance(parent.args[0], ast.Name) and parent.args[0].id in _SELF
            )
            if not direct:
                self.flag(node, R.SELF, (
                    f"'{base.id}.{node.attr}' takes a method off its class; call it on an "
                    "instance (or as Base.method(self, ...))"))
        if not self._is_attribute_base(node):  # check each chain once, at its outer end
            path = self.resolve(node)
            if path is not None:
                self.check_path(node, path, importing=False)
                denied = isinstance(A.lookup(path), tuple)  # already reported; not resolved
                if not denied and _is_module(path) and not self._is_attr_builtin_base(node):
                    self.flag(node, R.MODULE_ALIAS, (
                        f"the module '{path}' may only be used as {path}.<name>, not passed "
                        "around or rebound"))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (node.args or node.keywords) and self.resolve(func) in R.UNINIT_CONSTRUCTORS:
            self.flag(node, R.INTROSPECT, f"'{self.resolve(func)}(...)' is not allowed: "
                      f"{R.UNINIT_CONSTRUCTOR_WHY}")
        if isinstance(func, ast.Name) and func.id in _ATTR_BUILTINS:
            self._check_attr_builtin(node, func.id)
        if isinstance(func, ast.Name) and func.id == "super" and (node.args or node.keywords):
            args = node.args
            if not (
                len(args) == 2 and not node.keywords
                and isinstance(args[0], ast.Name) and args[0].id in self.classes
                and isinstance(args[1], ast.Name) and args[1].id in _SELF
            ):
                self.flag(node, R.SELF, "use super() or super(ThisClass, self) only")

    def _check_attr_builtin(self, node: ast.Call, name: str) -> None:
        if len(node.args) < 2 or not (
            isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
        ):
            self.flag(node, R.DYNAMIC, (
                f"{name}() with a computed attribute name is dynamic code; use an explicit "
                "dict or nn.ModuleList/ModuleDict"))
            return
        base, attr = node.args[0], node.args[1].value
        if name in ("setattr", "delattr") and not (
            isinstance(base, ast.Name) and base.id == "self"
        ):
            self.flag(node, R.ATTR_ASSIGN, (
                f"{name}() on anything but self can monkeypatch modules or the harness"))
        elif name in ("setattr", "delattr") and attr in R.HARNESS_NAMES:
            self._flag_harness_name(node, attr, "setting")
        if attr in _FORMAT_METHODS:
            self._check_format(node, base, attr)
        self._check_attr_name(node, base, attr)
        path = self.resolve(base)
        if path is not None:
            full = f"{path}.{attr}"
            self.check_path(node, full, importing=False)
            # getattr(torch, "nn") would hand the module to a variable, and attribute chains
            # on a variable are not checked against the allow-list (`m.functional.torch.sys`)
            if (name == "getattr" and _is_module(full)
                    and not isinstance(A.lookup(full), tuple)):
                self.flag(node, R.MODULE_ALIAS, (
                    f"getattr({path}, {attr!r}) hands over the module '{full}'; write "
                    f"{full}.<name>"))

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target)
        if self.resolve(node.value) in R.UNINIT_CONSTRUCTORS:
            self.flag(node, R.INTROSPECT, f"'{self.resolve(node.value)}' may not be held in a "
                      f"variable (called, it {R.UNINIT_CONSTRUCTOR_WHY}); name it directly")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target)

    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt)
            return
        if isinstance(target, ast.Starred):
            self._check_target(target.value)
            return
        if not isinstance(target, (ast.Attribute, ast.Subscript)):
            return
        root = _chain_root(target.value, calls=True)
        what = None
        if root is None:
            what = "a computed object"
        elif root in self.imports:
            what = f"the imported '{self.imports[root]}' (a module shared with the harness)"
        elif root in self.ctx_names and not self._autograd_ctx(target, root):
            what = f"'{root}', which belongs to the harness"
        elif root in R.BUILTINS or root in ("object", "int", "float", "str", "list", "dict"):
            what = f"the builtin '{root}'"
        elif (isinstance(target, ast.Attribute) and root not in _SELF
              and target.attr in protected_names()):
            what = (f"an object other than self, under the name '{target.attr}' that torch's "
                    "tensors and modules (or ctx) use for a method")
        if what is not None:
            self.flag(target, R.ATTR_ASSIGN, (
                f"assigning to an attribute of {what} is monkeypatching; assign only to "
                "self.<name> or to objects you created"))
        elif isinstance(target, ast.Attribute) and target.attr in R.HARNESS_NAMES:
            self._flag_harness_name(target, target.attr, "assigning")

    def _flag_harness_name(self, node: ast.AST, name: str, doing: str) -> None:
        self.flag(node, R.OVERRIDE, (
            f"{doing} '{name}' replaces torch machinery (nn.Module, Optimizer) that the "
            "harness uses to snapshot, load, count, move, call or record a model; pick "
            "another name (a model defines forward(), an optimiser step())"))

    def _check_format(self, node: ast.AST, base: ast.AST, method: str) -> None:
        if not (isinstance(base, ast.Constant) and isinstance(base.value, str)):
            self.flag(node, R.FORMAT, (
                f"'.{method}' on a format string that is not a literal could reach "
                "attributes and indexes of its arguments; use an f-string or a literal "
                "format string"))
            return
        problem = format_string_problem(base.value)
        if problem is not None:
            self.flag(node, R.FORMAT, (
                f"format string {problem}: format fields that reach attributes or indexes "
                "run lookups the policy cannot see; format plain values ('{}', '{:.3f}') "
                "or use an f-string"))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            path = self.resolve(base)
            if path and path.split(".")[0] == "torch" and path.split(".")[-1] in R.TENSOR_BASES:
                self.flag(node, R.TENSOR_SUBCLASS, (
                    f"subclassing {path} can intercept the harness's ops; wrap tensors in an "
                    "nn.Module instead"))
            if not isinstance(base, (ast.Name, ast.Attribute, ast.Subscript)):
                self.flag(base, R.DYNAMIC, (
                    "a class base must name a class (Base or module.Base), not be computed"))
            elif not self._named_base(base.value if isinstance(base, ast.Subscript) else base):
                self.flag(base, R.DYNAMIC, (
                    "a class base must be a class imported from an allowed module, a class "
                    "defined in this file or a builtin, named directly (not through a "
                    "variable: what it holds is not checked)"))
        for kw in node.keywords:
            if kw.arg == "metaclass":
                self.flag(node, R.DYNAMIC, "metaclasses are not needed by a model")
            else:
                self.flag(node, R.DYNAMIC, (
                    "class keywords go to metaclasses and __init_subclass__ hooks, which a "
                    "model does not need"))
        for bound, name in _class_bindings(node):
            if name in R.HARNESS_NAMES:
                self._flag_harness_name(bound, name, "defining")
        self._check_receivers(node)

    def _check_receivers(self, node: ast.ClassDef) -> None:
        """A method's function stays in its class, so `self` is always the file's own
        instance (receivers.py)."""
        for read in receivers.method_name_reads(node):
            self.flag(read, R.SELF, (
                f"'{read.id}' is a method of this class: its function may not be taken out "
                "of the class body (call it on an instance, or as Base.method(self, ...))"))
        defs = {item.name for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
        items = [(d, defs) for item in node.body
                 if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for d in item.decorator_list]
        items += [(d, set()) for d in node.decorator_list]
        for deco, names in items:
            if not receivers.keeps_nothing(deco, self.resolve, self.rebound, names):
                self.flag(deco, R.SELF, (
                    "this decorator receives the plain function (or class), which could then "
                    "be called with any object as self; use staticmethod, property (and "
                    ".setter) or a library decorator (docs/gates.md); for a classmethod, a "
                    "module-level function that builds the instance"))

    def _named_base(self, node: ast.AST) -> bool:
        """Does a class base name its class directly: through an import, or as a class of
        this file or a builtin that nothing rebinds? A variable could hold any class (say
        torch.Tensor, whose subclasses intercept the harness's ops), unseen by the checks
        that read paths."""
        if self.resolve(node) is not None:
            return True
        return (isinstance(node, ast.Name) and node.id not in self.rebound
                and (node.id in self.classes or node.id in _BUILTIN_NAMES))

    def _a_parameter(self, node: ast.Name) -> bool:
        """Does `node` name a parameter of a function it is in the body of? (PyTorch's own
        `forward(self, input)`.) Defaults, decorators and annotations are evaluated outside
        the function, where the name is the builtin, so they never count."""
        child, scope = node, self.parent.get(node)
        while scope is not None:
            if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                args = scope.args
                names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
                names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
                body = scope.body if isinstance(scope.body, list) else [scope.body]
                if node.id in names and any(child is stmt for stmt in body):
                    return True
            child, scope = scope, self.parent.get(scope)
        return False

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if _is_dunder(node.name) and node.name not in R.ALLOWED_DUNDER_DEFS:
            rule, why = R.DUNDER_DEFS.get(node.name, (R.OVERRIDE, R.IMPLICIT_WHY))
            self.flag(node, rule, f"defining '{node.name}' is not allowed: {why}")
        self._check_self_params(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._check_self_params(node)

    def _check_self_params(self, node: ast.AST) -> None:
        # `self` and `cls` may only name the receiver of a method of a class in this file,
        # so that assignments to self.<name> can never reach torch's or the harness's objects.
        args = node.args
        every = args.posonlyargs + args.args + args.kwonlyargs
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        first = (args.posonlyargs + args.args)[:1]
        is_method = (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and isinstance(self.parent.get(node), ast.ClassDef)
            and not _decorated(node, "staticmethod")
        )
        for arg in every:
            if arg.arg in _SELF and not (is_method and first and arg is first[0]):
                self.flag(arg, R.SELF, (
                    f"'{arg.arg}' may only be the first parameter of a method defined in a "
                    "class; rename this parameter"))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        for name in node.names:
            if _is_dunder(name):
                self.flag(node, R.INTROSPECT, f"'{name}' is interpreter internals")
            self._check_bound_name(node, name)

    visit_Nonlocal = visit_Global


def _mangled_owner(name: str) -> str | None:
    """'TrainContext' for '_TrainContext__core' (a name mangled by its class), else None."""
    owner, sep, rest = name[1:].partition("__")
    if name.startswith("__") or not sep or not rest or not owner.isidentifier():
        return None
    return owner


def _is_module(path: str) -> bool:
    return A.is_allowed_module(path) or is_module(path)


def _class_bindings(node: ast.ClassDef) -> Iterator[tuple[ast.AST, str]]:
    """Every name the class body binds (methods, class attributes, loop and import names,
    `__slots__` entries), without entering nested functions or classes."""
    stack: list[ast.AST] = list(node.body)
    while stack:
        item = stack.pop()
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield item, item.name
            continue
        if isinstance(item, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            continue  # scopes of their own
        if isinstance(item, ast.Name) and not isinstance(item.ctx, ast.Load):
            yield item, item.id
        elif isinstance(item, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and item.name:
            yield item, item.name
        elif isinstance(item, ast.alias):
            yield item, (item.asname or item.name).split(".")[0]
        elif isinstance(item, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets
        ):
            for const in ast.walk(item.value):
                if isinstance(const, ast.Constant) and isinstance(const.value, str):
                    yield const, const.value
        stack.extend(ast.iter_child_nodes(item))


_AUTOGRAD_METHODS = frozenset({"forward", "backward", "setup_context", "jvp", "vjp"})
_AUTOGRAD_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})


def _decorated(node: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    return any(isinstance(d, ast.Name) and d.id == name for d in node.decorator_list)


def _chain_root(node: ast.AST, *, calls: bool) -> str | None:
    """The Name at the root of `a.b[c].d` (and of `a.b().c` when `calls`), else None."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif calls and isinstance(node, ast.Call):
            node = node.func
        else:
            return None
