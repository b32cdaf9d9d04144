"""What the AST policy refuses on names and objects, as data (docs/security.md A6, B2, B7, B8).

Which modules a bundle may import, and which of their members it may use, is the table in
`allowlist.py`. This file holds the rule ids and the rules about everything else: builtins,
attribute names refused on any object, the special methods a bundle may define, and the
names of nn.Module's machinery that no bundle may define or assign. Bump `POLICY_VERSION`
whenever anything here or in `allowlist.py` changes: it keys the LLM verdict cache and is
reported by `prism check`.
"""

from __future__ import annotations

POLICY_VERSION = "ast-11"

# Rule ids a miner sees; docs/gates.md explains each.
SYNTAX = "AST-SYNTAX"
CONTRACT = "AST-CONTRACT"
IMPORT = "AST-IMPORT"
MEMBER = "AST-MEMBER"
FILE = "AST-FILE"
PROCESS = "AST-PROCESS"
FFI = "AST-FFI"
DESERIALIZE = "AST-DESERIALIZE"
DYNAMIC = "AST-DYNAMIC"
INTROSPECT = "AST-INTROSPECT"
FORMAT = "AST-FORMAT"
PRIVATE = "AST-PRIVATE"
ATTR_ASSIGN = "AST-ATTR-ASSIGN"
OVERRIDE = "AST-OVERRIDE"
MODULE_ALIAS = "AST-MODULE-ALIAS"
DISPATCH = "AST-DISPATCH"
TENSOR_SUBCLASS = "AST-TENSOR-SUBCLASS"
HOOK = "AST-HOOK"
SELF = "AST-SELF"
SEED = "AST-SEED"
COMPILE = "AST-COMPILE"
LITERAL = "AST-LITERAL"
BLOB = "AST-BLOB"

SEED_WHY = ("the challenge seeds every RNG before miner code runs; a chosen seed, a private "
            "generator or a read of RNG state smuggles a searched-for initialisation or tells "
            "a check from scoring. Draw from torch.rand/randn/randint/randperm")
_NUMPY_WHY = "NumPy arrays expose files, pickling and ctypes; use .item() or .tolist()"
COMPILE_WHY = "compilation is a harness flag: use ctx.batches(..., compile=True)"
_SNAPSHOT_HOOK_WHY = ("state-dict and load hooks run when the harness snapshots or loads the "
                      "model, so a model could tell an audit or the held-out pass from scoring")
_VIEW_WHY = ("storage access reads memory outside a tensor's view (a harness tensor's storage "
             "may hold more than the batch); index the tensor itself")
_UNINIT_WHY = ("uninitialised memory may hold what the process freed (a compiled graph does not "
               "fill it); use torch.zeros, zeros_like or new_zeros")

# Tensor classes whose constructor, given sizes, returns uninitialised memory: refused when
# called with arguments, or held in a variable (annotations and isinstance name them freely)
UNINIT_CONSTRUCTORS = frozenset({"torch.Tensor"})
UNINIT_CONSTRUCTOR_WHY = ("returns uninitialised memory, which may hold what the process "
                          "freed; use torch.zeros or torch.tensor")

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
    "compile": (COMPILE, COMPILE_WHY),
    "from_file": (FILE, "bundles do not read files"),
    **dict.fromkeys(("share_memory_", "share_memory"), (
        PROCESS, "shared memory outlives the process that wrote it (the eval answers each "
        "held-out task in a process of its own); keep tensors private")),
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
    **dict.fromkeys(
        "register_state_dict_pre_hook register_state_dict_post_hook "
        "register_load_state_dict_pre_hook register_load_state_dict_post_hook".split(),
        (HOOK, _SNAPSHOT_HOOK_WHY),
    ),
    "grad_fn": (INTROSPECT, "the autograd graph of the harness's loss exposes the harness's "
                "computation; call .backward() on batch.loss"),
    "next_functions": (INTROSPECT, "the autograd graph exposes the harness's computation"),
    **dict.fromkeys("untyped_storage storage set_ as_strided as_strided_".split(),
                    (INTROSPECT, _VIEW_WHY)),
    **dict.fromkeys("empty empty_like empty_strided empty_permuted new_empty new_empty_strided "
                    "resize_ resize_as_ new".split(), (INTROSPECT, _UNINIT_WHY)),
    "TorchFunctionMode": (DISPATCH, "function modes intercept the harness's ops"),
    "TorchDispatchMode": (DISPATCH, "dispatch modes intercept the harness's ops"),
    "register": (INTROSPECT, "ABC.register writes into a registry the whole process shares "
                 "(it outlives an evaluation task, so it could carry what one task saw to the "
                 "next); subclass the ABC instead"),
    "attrgetter": (DYNAMIC, "attribute access by string; write obj.name"),
    "methodcaller": (DYNAMIC, "method call by string; write obj.name()"),
    "manual_seed": (SEED, SEED_WHY),
    "set_rng_state": (SEED, SEED_WHY),
    "set_state": (SEED, SEED_WHY),
    "numpy": (FFI, _NUMPY_WHY),
    "ctypes": (FFI, _NUMPY_WHY),
    "tofile": (FILE, _NUMPY_WHY),
    "dump": (FILE, "dumping objects writes or pickles them"),
    "dumps": (DESERIALIZE, "dumping objects pickles them"),
    **dict.fromkeys(
        "f_back f_globals f_locals f_builtins f_code f_trace tb_frame tb_next gi_frame "
        "gi_code gi_yieldfrom cr_frame cr_code ag_frame ag_code co_code co_consts "
        "co_names cell_contents".split(),
        (INTROSPECT, "frames and code objects expose the harness's state"),
    ),
}

# Names refused in architecture.py only. Its code also runs in the evaluation process, which
# answers many held-out tasks one after another: a counter that outlives a task could carry
# what one task was shown into the next (training.py never runs there).
ARCHITECTURE_PATHS: dict[str, tuple[str, str]] = {
    **dict.fromkeys(
        ["torch.cuda.memory_allocated", "torch.cuda.max_memory_allocated",
         "torch.cuda.memory_reserved", "torch.cuda.max_memory_reserved",
         "torch.cuda.reset_peak_memory_stats"],
        (INTROSPECT, "the GPU's memory counters outlive an evaluation task, so "
         "architecture.py may not read them (they could carry what one held-out task saw to "
         "the next); read them in training.py")),
    # every held-out task starts when the one before it ended: a model holding a clock could
    # choose when it ends and the next read when it started (a red team carried 3 bits a
    # task so), so the model reads no clock at all
    **dict.fromkeys(
        ["time", *(f"time.{n}" for n in "time time_ns perf_counter perf_counter_ns monotonic "
                                         "monotonic_ns".split())],
        (INTROSPECT, "architecture.py may not read a clock (one held-out task could time its "
         "end for the next to read); time things in training.py")),
}

# Dunder names a bundle may use; every other dunder name or attribute is introspection.
DUNDER_NAMES = frozenset({"__name__", "__all__", "__slots__"})
DUNDER_ATTRIBUTES = frozenset({"__init__"})

# Special methods a bundle's classes may define. The interpreter and torch call every other
# one implicitly (attribute lookup, calls, repr, hashing, truthiness, copying, pickling,
# freeing, descriptors, class creation), so a model could notice who touches it and when.
ALLOWED_DUNDER_DEFS = frozenset({"__init__", "__post_init__"})
IMPLICIT_WHY = ("the interpreter calls special methods implicitly (repr, hashing, "
                 "truthiness, comparison, copying, iteration), so a model could notice who "
                 "touches it; only __init__ and __post_init__ may be defined")

# Special methods with a reason of their own; any other one gets (OVERRIDE, IMPLICIT_WHY).
DUNDER_DEFS: dict[str, tuple[str, str]] = {
    "__torch_function__": (DISPATCH, "__torch_function__ overrides intercept the harness's ops"),
    "__torch_dispatch__": (DISPATCH, "__torch_dispatch__ overrides intercept the harness's ops"),
    **dict.fromkeys(
        "__reduce__ __reduce_ex__ __setstate__ __getstate__ __getnewargs__ "
        "__getnewargs_ex__".split(),
        (DESERIALIZE, "pickling hooks run code when objects are (de)serialised"),
    ),
    **dict.fromkeys(
        "__init_subclass__ __set_name__ __instancecheck__ __subclasscheck__ "
        "__class_getitem__ __prepare__ __mro_entries__ __new__".split(),
        (DYNAMIC, "class-creation hooks are not needed by a model"),
    ),
    "__del__": (OVERRIDE, "__del__ runs when the harness frees an object (a snapshot, the "
                "twin), so a model could notice it"),
    **dict.fromkeys(
        "__get__ __set__ __delete__".split(),
        (OVERRIDE, "descriptors run code whenever the harness reads or sets an attribute"),
    ),
    **dict.fromkeys(
        "__getattr__ __getattribute__ __setattr__ __delattr__ __dir__".split(),
        (OVERRIDE, "nn.Module's attribute plumbing is how the harness finds parameters, "
         "buffers and submodules; overriding it can hide weights or notice an audit"),
    ),
    "__call__": (OVERRIDE, "nn.Module.__call__ runs forward() for the harness; define "
                 "forward() instead"),
    **dict.fromkeys(
        "__copy__ __deepcopy__ __repr__ __str__ __format__ __hash__ __eq__ __bool__ __len__ "
        "__iter__ __sizeof__".split(),
        (OVERRIDE, IMPLICIT_WHY),
    ),
}

# nn.Module's machinery: the methods and state the harness uses to snapshot, load, count,
# move, switch and call a model (and to read an optimiser's settings). A bundle's class that
# defines one of these names (as a method, property or class attribute), or code that
# assigns one on any object (self included), could notice a snapshot, an audit or the
# held-out pass, hide weights from the parameter cap, or misreport an optimiser. The private
# ones may not even be read: they are the hook tables and registries themselves. A model
# defines forward() (and may define extra_repr()); a custom optimiser defines step() and
# keeps per-parameter `state`; every other name here belongs to torch. tests/gates check
# this covers every name nn.Module and torch.optim.Optimizer have.
HARNESS_METHODS: dict[str, str] = {
    "snapshot and loading": """
        state_dict _save_to_state_dict load_state_dict _load_from_state_dict get_extra_state
        set_extra_state _register_state_dict_hook _register_load_state_dict_pre_hook
        register_state_dict_pre_hook register_state_dict_post_hook
        register_load_state_dict_pre_hook register_load_state_dict_post_hook _version
        T_destination dump_patches
    """,
    "parameters, buffers, submodules (the parameter cap, optimisers, DDP)": """
        parameters named_parameters buffers named_buffers children named_children modules
        named_modules _named_members get_parameter get_buffer get_submodule set_submodule
        add_module register_module register_parameter register_buffer
    """,
    "moving, casting and mode switches": """
        _apply apply to to_empty cpu cuda ipu xpu mtia float double half bfloat16 type
        share_memory train eval requires_grad_ zero_grad
    """,
    "calling (the scored forward) and hooks": """
        _call_impl _wrapped_call_impl _compiled_call_impl _slow_forward compile
        _get_backward_hooks _get_backward_pre_hooks _maybe_warn_non_full_backward_hook
        register_forward_hook register_forward_pre_hook register_backward_hook
        register_full_backward_hook register_full_backward_pre_hook call_super_init
        _get_name _replicate_for_data_parallel
    """,
    "optimiser machinery (the harness's global step hook reads param_groups)": """
        param_groups defaults add_param_group OptimizerPreHook OptimizerPostHook
        register_step_pre_hook register_step_post_hook profile_hook_step
        _patch_step_function _optimizer_step_code _accelerator_graph_capture_health_check
        _cuda_graph_capture_health_check _group_tensors_by_device_and_dtype
        _process_value_according_to_param_policy _warned_capturable_if_run_uncaptured
        _zero_grad_profile_name _optimizer_step_pre_hooks _optimizer_step_post_hooks
        _optimizer_state_dict_pre_hooks _optimizer_state_dict_post_hooks
        _optimizer_load_state_dict_pre_hooks _optimizer_load_state_dict_post_hooks
    """,
    "state every Module instance holds": """
        training _parameters _buffers _non_persistent_buffers_set _modules _forward_hooks
        _forward_hooks_always_called _forward_hooks_with_kwargs _forward_pre_hooks
        _forward_pre_hooks_with_kwargs _backward_hooks _backward_pre_hooks
        _is_full_backward_hook _state_dict_hooks _state_dict_pre_hooks
        _load_state_dict_pre_hooks _load_state_dict_post_hooks
    """,
}
HARNESS_NAMES = frozenset(n for names in HARNESS_METHODS.values() for n in names.split())

# Bases that make a class a tensor subclass (last component of the resolved name).
TENSOR_BASES = frozenset({"Tensor", "Parameter", "Buffer", "UninitializedParameter"})

# Names whose attributes belong to the harness: the contract's ctx argument.
CTX_NAMES = frozenset({"ctx"})
