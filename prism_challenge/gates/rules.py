"""What the AST policy allows and forbids, as data (DESIGN §4, THREAT_MODEL A6 and B2).

The policy is an allow-list: a bundle may import only what an honest model and training
loop need, and inside those modules a deny-list removes the entries that reach files,
processes, foreign code, deserialisation, compilers or the dispatcher. Dotted names are
looked up by their longest matching prefix; a key ending in ``.*`` covers the children of a
module (not the module itself), so ``torch.distributed`` can be imported while only the
collectives listed here are usable. Bump `POLICY_VERSION` whenever anything here changes:
it keys the LLM verdict cache and is reported by `prism check`.
"""

from __future__ import annotations

POLICY_VERSION = "ast-2"

# Rule ids a miner sees; docs/gates.md explains each.
SYNTAX = "AST-SYNTAX"
CONTRACT = "AST-CONTRACT"
IMPORT = "AST-IMPORT"
FILE = "AST-FILE"
PROCESS = "AST-PROCESS"
FFI = "AST-FFI"
DESERIALIZE = "AST-DESERIALIZE"
DYNAMIC = "AST-DYNAMIC"
INTROSPECT = "AST-INTROSPECT"
PRIVATE = "AST-PRIVATE"
ATTR_ASSIGN = "AST-ATTR-ASSIGN"
MODULE_ALIAS = "AST-MODULE-ALIAS"
DISPATCH = "AST-DISPATCH"
TENSOR_SUBCLASS = "AST-TENSOR-SUBCLASS"
HOOK = "AST-HOOK"
SELF = "AST-SELF"
SEED = "AST-SEED"

_SEED_WHY = ("the challenge forces the seed of the initialisation; a chosen seed or RNG "
             "state is a way to smuggle a searched-for lucky initialisation")
_NUMPY_WHY = "NumPy arrays expose files, pickling and ctypes; use .item() or .tolist()"
COMPILE = "AST-COMPILE"
LITERAL = "AST-LITERAL"
BLOB = "AST-BLOB"

ALLOWED = None  # marker value in PATHS: the name is usable

_COMPILE_WHY = "compilation is a harness flag: use ctx.batches(..., compile=True)"

# Modules a bundle may import, and the entries inside them it may not use. Value: None
# (allowed) or (rule, why).
PATHS: dict[str, tuple[str, str] | None] = {
    # torch: what models and training loops use.
    "torch": ALLOWED,
    "torch.nn": ALLOWED,
    "torch.nn.functional": ALLOWED,
    "torch.nn.init": ALLOWED,
    "torch.nn.utils": ALLOWED,
    "torch.nn.attention": ALLOWED,
    "torch.optim": ALLOWED,
    "torch.optim.lr_scheduler": ALLOWED,
    "torch.amp": ALLOWED,
    "torch.autograd": ALLOWED,
    "torch.func": ALLOWED,
    "torch.cuda": ALLOWED,
    "torch.utils.checkpoint": ALLOWED,
    # Multi-GPU runs need collectives and DDP, but nothing that opens stores, RPC or
    # pickles objects across ranks.
    "torch.distributed": ALLOWED,
    "torch.distributed.*": (PROCESS, "only collectives are allowed from torch.distributed"),
    "torch.distributed.all_reduce": ALLOWED,
    "torch.distributed.all_gather": ALLOWED,
    "torch.distributed.all_gather_into_tensor": ALLOWED,
    "torch.distributed.reduce_scatter_tensor": ALLOWED,
    "torch.distributed.reduce": ALLOWED,
    "torch.distributed.broadcast": ALLOWED,
    "torch.distributed.barrier": ALLOWED,
    "torch.distributed.get_rank": ALLOWED,
    "torch.distributed.get_world_size": ALLOWED,
    "torch.distributed.is_available": ALLOWED,
    "torch.distributed.is_initialized": ALLOWED,
    "torch.distributed.ReduceOp": ALLOWED,
    "torch.nn.parallel": ALLOWED,
    "torch.nn.parallel.*": (PROCESS, "only DistributedDataParallel is allowed"),
    "torch.nn.parallel.DistributedDataParallel": ALLOWED,
    # Denied inside torch.
    "torch.load": (DESERIALIZE, "torch.load unpickles data and can run arbitrary code"),
    "torch.save": (FILE, "bundles do not write files; the harness saves the final weights"),
    "torch.serialization": (DESERIALIZE, "serialisation reads and unpickles files"),
    "torch.package": (DESERIALIZE, "torch.package loads pickled code"),
    "torch.hub": (DESERIALIZE, "torch.hub downloads code and weights; build from scratch"),
    "torch.from_file": (FILE, "bundles do not read files"),
    "torch.ops": (FFI, "torch.ops loads and calls compiled operators"),
    "torch.library": (FFI, "torch.library defines and overrides operators"),
    "torch.classes": (FFI, "torch.classes loads compiled classes"),
    "torch.utils": (IMPORT, "only torch.utils.checkpoint is allowed from torch.utils"),
    "torch.utils.cpp_extension": (FFI, "compiled extensions are foreign code"),
    "torch.utils.data": (PROCESS, "data comes from ctx.batches; DataLoader starts processes"),
    "torch.utils._python_dispatch": (DISPATCH, "dispatch modes intercept the harness's ops"),
    "torch.multiprocessing": (PROCESS, "bundles do not start processes"),
    "torch.overrides": (DISPATCH, "function modes intercept the harness's ops"),
    "torch.compile": (COMPILE, _COMPILE_WHY),
    "torch.compiler": (COMPILE, _COMPILE_WHY),
    "torch.jit": (COMPILE, _COMPILE_WHY + " (torch.jit also loads serialised code)"),
    "torch.fx": (COMPILE, _COMPILE_WHY + " (torch.fx generates and execs code)"),
    "torch.export": (COMPILE, _COMPILE_WHY),
    "torch.autograd.graph": (INTROSPECT, "saved-tensor hooks observe the harness's graph"),
    "torch.autograd.profiler": (FILE, "profilers write trace files"),
    "torch.profiler": (FILE, "profilers write trace files"),
    "torch.onnx": (FILE, "exporters write files"),
    "torch.manual_seed": (SEED, _SEED_WHY),
    "torch.set_rng_state": (SEED, _SEED_WHY),
    "torch.random.manual_seed": (SEED, _SEED_WHY),
    "torch.random.set_rng_state": (SEED, _SEED_WHY),
    "torch.cuda.manual_seed": (SEED, _SEED_WHY),
    "torch.cuda.manual_seed_all": (SEED, _SEED_WHY),
    "torch.cuda.set_rng_state": (SEED, _SEED_WHY),
    "torch.cuda.set_rng_state_all": (SEED, _SEED_WHY),
    # Standard library: pure helpers only.
    "__future__": ALLOWED,
    "math": ALLOWED,
    "typing": ALLOWED,
    "typing.get_type_hints": (DYNAMIC, "get_type_hints evaluates string annotations"),
    "typing.ForwardRef": (DYNAMIC, "ForwardRef evaluates strings as code"),
    "dataclasses": ALLOWED,
    "dataclasses.make_dataclass": (DYNAMIC, "write the dataclass out explicitly"),
    "functools": ALLOWED,
    "itertools": ALLOWED,
    "collections": ALLOWED,
    "collections.abc": ALLOWED,
    "enum": ALLOWED,
    "abc": ALLOWED,
    "numbers": ALLOWED,
    "operator": ALLOWED,
    "operator.attrgetter": (DYNAMIC, "attribute access by string; write obj.name"),
    "operator.methodcaller": (DYNAMIC, "method call by string; write obj.name()"),
    "random": ALLOWED,
    "random.seed": (SEED, _SEED_WHY),
    "random.setstate": (SEED, _SEED_WHY),
    "time": ALLOWED,
    "contextlib": ALLOWED,
    "contextlib.chdir": (FILE, "bundles do not touch the file system"),
    "copy": ALLOWED,
    "warnings": ALLOWED,
}

# Why a well-known module is refused, for a message a miner can act on.
IMPORT_WHY: dict[str, str] = {
    **dict.fromkeys(
        "socket ssl http urllib urllib3 requests httpx aiohttp ftplib smtplib poplib imaplib "
        "telnetlib xmlrpc asyncio selectors select websocket websockets dns".split(),
        "network access",
    ),
    **dict.fromkeys(
        "os sys pathlib io shutil tempfile glob fnmatch fileinput mmap sqlite3 shelve dbm "
        "zipfile tarfile gzip bz2 lzma csv json tomllib configparser logging".split(),
        "file system, environment or interpreter access",
    ),
    **dict.fromkeys(
        "subprocess multiprocessing threading _thread concurrent signal pty resource "
        "sched".split(),
        "processes, threads or signals",
    ),
    **dict.fromkeys(
        "ctypes cffi _ctypes importlib pkgutil runpy zipimport imp builtins code codeop "
        "types".split(),
        "foreign or dynamically loaded code",
    ),
    **dict.fromkeys(
        "pickle cPickle _pickle marshal copyreg dill cloudpickle joblib safetensors numpy "
        "transformers huggingface_hub".split(),
        "deserialisation or pretrained weights",
    ),
    **dict.fromkeys(
        "base64 binascii codecs zlib struct array hashlib hmac secrets uuid".split(),
        "run-time decoding of embedded data",
    ),
    **dict.fromkeys(
        "gc inspect traceback dis ast weakref ctypes.util sysconfig platform site "
        "atexit faulthandler tracemalloc linecache".split(),
        "interpreter introspection",
    ),
}

# Builtins that are refused wherever they are named (called or aliased).
BUILTINS: dict[str, tuple[str, str]] = {
    "eval": (DYNAMIC, "code must be written out, not evaluated from strings"),
    "exec": (DYNAMIC, "code must be written out, not executed from strings"),
    "compile": (DYNAMIC, "code must be written out, not compiled from strings"),
    "__import__": (DYNAMIC, "use a plain import of an allowed module"),
    "globals": (INTROSPECT, "namespaces are not inspectable; use the names directly"),
    "locals": (INTROSPECT, "namespaces are not inspectable; use the names directly"),
    "vars": (INTROSPECT, "namespaces are not inspectable; use the names directly"),
    "dir": (INTROSPECT, "objects are not inspectable; use the names directly"),
    "breakpoint": (INTROSPECT, "there is no debugger in the sandbox"),
    "open": (FILE, "bundles do not read or write files"),
    "input": (FILE, "there is no standard input in the sandbox"),
    "help": (PROCESS, "help() may start a pager process"),
    "license": (FILE, "license() reads files"),
    "memoryview": (BLOB, "raw memory views are not needed by a model"),
    "bytes": (BLOB, "bytes objects are how encoded blobs are smuggled; use tensors"),
    "bytearray": (BLOB, "bytes objects are how encoded blobs are smuggled; use tensors"),
}

# Attribute names refused on any object, because aliasing could hide the owner.
ATTRIBUTES: dict[str, tuple[str, str]] = {
    "compile": (COMPILE, _COMPILE_WHY),
    "from_file": (FILE, "bundles do not read files"),
    "from_pretrained": (DESERIALIZE, "pretrained weights are refused; build from scratch"),
    "frombuffer": (BLOB, "decoding embedded bytes into tensors smuggles data"),
    "fromhex": (BLOB, "decoding embedded hex smuggles data"),
    "from_bytes": (BLOB, "decoding embedded bytes smuggles data"),
    "decode": (BLOB, "decoding embedded data at run time is refused"),
    "as_subclass": (TENSOR_SUBCLASS, "tensor subclasses can intercept the harness's ops"),
    "register_forward_hook": (HOOK, "forward hooks can alter the scored forward; put the "
                              "computation in forward()"),
    "register_forward_pre_hook": (HOOK, "forward hooks can alter the scored forward; put "
                                  "the computation in forward()"),
    "register_module_forward_hook": (HOOK, "global module hooks reach the harness"),
    "register_module_forward_pre_hook": (HOOK, "global module hooks reach the harness"),
    "TorchFunctionMode": (DISPATCH, "function modes intercept the harness's ops"),
    "TorchDispatchMode": (DISPATCH, "dispatch modes intercept the harness's ops"),
    "attrgetter": (DYNAMIC, "attribute access by string; write obj.name"),
    "methodcaller": (DYNAMIC, "method call by string; write obj.name()"),
    "manual_seed": (SEED, _SEED_WHY),
    "set_rng_state": (SEED, _SEED_WHY),
    "set_state": (SEED, _SEED_WHY),
    "numpy": (FFI, _NUMPY_WHY),
    "ctypes": (FFI, _NUMPY_WHY),
    "tofile": (FILE, _NUMPY_WHY),
    "dump": (FILE, "dumping objects writes or pickles them"),
    "dumps": (DESERIALIZE, "dumping objects pickles them"),
    **dict.fromkeys(
        "f_back f_globals f_locals f_builtins f_code f_trace tb_frame tb_next gi_frame "
        "gi_code gi_yieldfrom cr_frame cr_code ag_frame ag_code co_code co_consts "
        "co_names".split(),
        (INTROSPECT, "frames and code objects expose the harness's state"),
    ),
}

# Dunder names a bundle may use; every other dunder name or attribute is introspection.
DUNDER_NAMES = frozenset({"__name__", "__all__", "__slots__"})
DUNDER_ATTRIBUTES = frozenset({"__init__"})

# Special methods a bundle may not define: the interpreter or torch call them implicitly.
DUNDER_DEFS: dict[str, tuple[str, str]] = {
    "__torch_function__": (DISPATCH, "__torch_function__ overrides intercept the harness's ops"),
    "__torch_dispatch__": (DISPATCH, "__torch_dispatch__ overrides intercept the harness's ops"),
    **dict.fromkeys(
        "__reduce__ __reduce_ex__ __setstate__ __getstate__".split(),
        (DESERIALIZE, "pickling hooks run code when objects are (de)serialised"),
    ),
    **dict.fromkeys(
        "__del__ __init_subclass__ __set_name__ __getattribute__ __instancecheck__ "
        "__subclasscheck__ __class_getitem__ __prepare__ __mro_entries__".split(),
        (DYNAMIC, "implicit interpreter hooks are not needed by a model"),
    ),
}

# Bases that make a class a tensor subclass (last component of the resolved name).
TENSOR_BASES = frozenset({"Tensor", "Parameter", "Buffer", "UninitializedParameter"})

# Names whose attributes belong to the harness: the contract's ctx argument.
CTX_NAMES = frozenset({"ctx"})


def lookup(dotted: str) -> tuple[str, str] | None | bool:
    """The entry governing `dotted`: None (allowed), (rule, why), or False (not listed)."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if k < len(parts) and prefix + ".*" in PATHS:
            return PATHS[prefix + ".*"]
        if prefix in PATHS:
            return PATHS[prefix]
    return False


def import_why(module: str) -> str:
    root = module.split(".")[0]
    return IMPORT_WHY.get(module, IMPORT_WHY.get(root, "not on the allow-list"))


ALLOWED_SUMMARY = (
    "torch (nn, nn.functional, nn.init, nn.utils, optim, optim.lr_scheduler, amp, autograd, "
    "func, cuda, utils.checkpoint, distributed collectives), math, typing, dataclasses, "
    "functools, itertools, collections, enum, abc, numbers, operator, random, time, "
    "contextlib, copy, warnings"
)

# Dotted names that are modules: they may be used only as `module.name`, never as values,
# so that `t = torch; t.load(...)` cannot hide a denied entry from the lookup above.
MODULES = frozenset(
    {
        "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.utils",
        "torch.nn.attention", "torch.nn.parallel", "torch.optim", "torch.optim.lr_scheduler",
        "torch.amp", "torch.autograd", "torch.func", "torch.cuda", "torch.utils",
        "torch.utils.checkpoint", "torch.distributed", "torch.backends", "torch.linalg",
        "torch.fft", "torch.special", "torch.random", "torch.jit", "torch.fx", "torch.hub",
        "torch.ops", "torch.library", "torch.overrides", "torch.multiprocessing",
        "__future__", "math", "typing", "dataclasses", "functools", "itertools",
        "collections", "collections.abc", "enum", "abc", "numbers", "operator", "random",
        "time", "contextlib", "copy", "warnings",
    }
)
