"""The modules a bundle may import and, for each, the names it may use from it (one table).

An honest model and training loop need torch's layers, tensor maths, optimisers and
schedules, and a few pure standard-library helpers; nothing else. So `PATHS` lists every
importable module with the exact members it may be used with, and anything not listed is
refused: a module that is not a key (AST-IMPORT), a member that is not in its module's list
(AST-MEMBER). Entries whose value is a `(rule, why)` pair are refusals with a reason a
miner can act on; they win over the lists, and a key ending in ``.*`` gives the reason for
every unlisted member of that module. Dotted names are looked up by their longest matching
prefix, so `torch.nn.Linear.weight` is governed by `torch.nn`'s list (the member `Linear`);
what follows a member is an attribute of an object, checked by the attribute rules.

Excluded on purpose (docs/gates.md says why for each): anything that reads or writes files
(also for another purpose: `warnings.formatwarning`, `linecache`, `traceback`, `inspect`,
`tokenize`, `io`, `os`, `pathlib`...), starts processes or threads, reaches the network,
loads or generates code, deserialises, reads or sets RNG state or global numerics the
harness shares, reads every field of an arbitrary object (`dataclasses.asdict`), or makes
a class whose attribute names are data (`collections.namedtuple`).

Bump `rules.POLICY_VERSION` whenever this table changes.
"""

from __future__ import annotations

import difflib

from prism_challenge.gates.rules import (
    ATTR_ASSIGN,
    COMPILE,
    COMPILE_WHY,
    DESERIALIZE,
    DISPATCH,
    DYNAMIC,
    FFI,
    FILE,
    IMPORT,
    INTROSPECT,
    MEMBER,
    PROCESS,
    SEED,
    SEED_WHY,
)

Denial = tuple[str, str]  # (rule, why)


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_GLOBAL_WHY = ("global numerics and thread settings are shared with the harness (and must be "
               "the same when the audit re-computes a step without training.py)")
_LINES_WHY = ("it reads source lines of any file named to it (linecache) to format a message; "
              "use warnings.warn(message)")

PATHS: dict[str, frozenset[str] | Denial] = {
    # --- torch: tensors, layers, optimisers ------------------------------------------
    "torch": _names("""
        Tensor Size dtype device finfo iinfo memory_format contiguous_format channels_last
        float float16 float32 float64 half double bfloat16 float8_e4m3fn float8_e5m2
        int int8 int16 int32 int64 long short uint8 bool complex64 complex128 cfloat cdouble

        tensor as_tensor zeros zeros_like ones ones_like full full_like
        arange linspace logspace eye rand rand_like randn randn_like randint randint_like
        randperm normal bernoulli multinomial poisson tril_indices triu_indices meshgrid
        complex polar

        cat concat concatenate stack hstack vstack dstack column_stack split chunk
        tensor_split unbind reshape flatten unflatten squeeze unsqueeze transpose permute
        movedim moveaxis swapaxes swapdims narrow select gather scatter scatter_add
        scatter_reduce index_select index_add index_copy index_fill index_put masked_select
        masked_fill masked_scatter take take_along_dim where nonzero argwhere flip fliplr
        flipud roll rot90 repeat_interleave tile broadcast_to broadcast_tensors
        broadcast_shapes diag diag_embed diagonal diagflat tril triu atleast_1d atleast_2d
        atleast_3d block_diag cartesian_prod combinations view_as_real view_as_complex t
        clone detach ravel numel

        abs absolute neg negative sign sgn exp exp2 expm1 log log2 log10 log1p sqrt rsqrt
        square pow float_power sin cos tan asin acos atan atan2 arcsin arccos arctan arctan2
        sinh cosh tanh asinh acosh atanh sigmoid logit erf erfc erfinv relu softmax
        log_softmax dropout clamp clip clamp_min clamp_max floor ceil round trunc frac fix
        fmod remainder reciprocal add sub subtract mul multiply div divide true_divide
        floor_divide maximum minimum fmax fmin lerp addcmul addcdiv hypot logaddexp
        logaddexp2 nan_to_num isnan isinf isfinite isposinf isneginf isreal isclose allclose
        equal eq ne gt ge lt le greater greater_equal less less_equal not_equal logical_and
        logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_xor bitwise_not
        bitwise_left_shift bitwise_right_shift sinc heaviside copysign signbit xlogy lgamma
        digamma polygamma mvlgamma i0 deg2rad rad2deg angle real imag conj

        sum mean nansum nanmean prod cumsum cumprod cummax cummin logcumsumexp max min amax
        amin aminmax argmax argmin std var std_mean var_mean median nanmedian mode quantile
        nanquantile logsumexp norm dist count_nonzero all any topk kthvalue sort argsort msort
        unique unique_consecutive bincount histc searchsorted bucketize cdist
        cosine_similarity pairwise_distance diff trapezoid cumulative_trapezoid renorm

        matmul mm bmm mv dot vdot outer inner einsum tensordot kron addmm addbmm baddbmm
        addmv addr cross trace det logdet slogdet inverse pinverse svd qr cholesky
        matrix_power matrix_exp

        no_grad enable_grad set_grad_enabled inference_mode is_grad_enabled autocast
        get_default_dtype promote_types result_type can_cast is_tensor is_floating_point vmap
        is_complex
    """),
    "torch.nn": _names("""
        Module ModuleList ModuleDict Sequential Parameter ParameterList ParameterDict Buffer
        Identity Linear Bilinear Embedding EmbeddingBag LayerNorm RMSNorm GroupNorm
        BatchNorm1d BatchNorm2d InstanceNorm1d Dropout Dropout1d Dropout2d AlphaDropout
        Conv1d Conv2d ConvTranspose1d ConvTranspose2d MaxPool1d AvgPool1d AdaptiveAvgPool1d
        AdaptiveMaxPool1d ReLU ReLU6 GELU SiLU Mish Tanh Sigmoid Softmax LogSoftmax Softmin
        Softplus Softsign ELU SELU CELU LeakyReLU PReLU GLU Hardswish Hardsigmoid Hardtanh
        Tanhshrink LogSigmoid Threshold Flatten Unflatten MultiheadAttention Transformer
        TransformerEncoder TransformerEncoderLayer TransformerDecoder TransformerDecoderLayer
        RNN LSTM GRU RNNCell LSTMCell GRUCell CrossEntropyLoss NLLLoss MSELoss L1Loss
        SmoothL1Loss HuberLoss KLDivLoss BCELoss BCEWithLogitsLoss ConstantPad1d ZeroPad1d
        ZeroPad2d ReplicationPad1d ReflectionPad1d Upsample PixelShuffle CosineSimilarity
        PairwiseDistance Fold Unfold
    """),
    "torch.nn.functional": _names("""
        linear bilinear conv1d conv2d conv_transpose1d conv_transpose2d pad embedding
        embedding_bag one_hot dropout dropout1d dropout2d alpha_dropout relu relu6 leaky_relu
        gelu silu mish elu selu celu softplus softsign sigmoid tanh hardtanh hardswish
        hardsigmoid glu logsigmoid tanhshrink threshold prelu softmax log_softmax softmin
        gumbel_softmax normalize layer_norm rms_norm group_norm batch_norm instance_norm
        local_response_norm cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss
        kl_div binary_cross_entropy binary_cross_entropy_with_logits cosine_similarity
        pairwise_distance scaled_dot_product_attention avg_pool1d max_pool1d
        adaptive_avg_pool1d adaptive_max_pool1d interpolate unfold fold pixel_shuffle
    """),
    "torch.nn.init": _names("""
        uniform_ normal_ trunc_normal_ constant_ ones_ zeros_ eye_ dirac_ xavier_uniform_
        xavier_normal_ kaiming_uniform_ kaiming_normal_ orthogonal_ sparse_ calculate_gain
    """),
    "torch.nn.utils": _names("""
        clip_grad_norm_ clip_grad_value_ clip_grads_with_norm_ get_total_norm
        parameters_to_vector vector_to_parameters
    """),
    "torch.nn.attention": _names("sdpa_kernel SDPBackend"),
    # Multi-GPU runs need collectives and DDP, but nothing that opens stores, RPC or
    # pickles objects across ranks.
    "torch.nn.parallel": _names("DistributedDataParallel"),
    "torch.nn.parallel.*": (PROCESS, "only DistributedDataParallel is allowed"),
    "torch.distributed": _names("""
        all_reduce all_gather all_gather_into_tensor reduce_scatter_tensor reduce broadcast
        barrier get_rank get_world_size is_available is_initialized ReduceOp
    """),
    "torch.distributed.*": (PROCESS, "only collectives are allowed from torch.distributed"),
    "torch.optim": _names("""
        Optimizer SGD Adam AdamW Adagrad Adadelta Adamax ASGD LBFGS NAdam RAdam RMSprop Rprop
        SparseAdam Muon
    """),
    "torch.optim.lr_scheduler": _names("""
        LRScheduler LambdaLR MultiplicativeLR StepLR MultiStepLR ConstantLR LinearLR
        ExponentialLR SequentialLR PolynomialLR CosineAnnealingLR ChainedScheduler
        ReduceLROnPlateau CyclicLR OneCycleLR CosineAnnealingWarmRestarts
    """),
    "torch.optim.swa_utils": _names("AveragedModel SWALR get_ema_avg_fn get_ema_multi_avg_fn"),
    "torch.amp": _names("autocast GradScaler"),
    "torch.autograd": _names("""
        Function grad backward no_grad enable_grad set_grad_enabled inference_mode
    """),
    "torch.func": _names("vmap grad grad_and_value vjp jvp jacrev jacfwd hessian"),
    "torch.utils.checkpoint": _names("checkpoint checkpoint_sequential"),
    "torch.linalg": _names("""
        norm vector_norm matrix_norm qr svd svdvals eigh eigvalsh cholesky solve inv pinv det
        slogdet lstsq matrix_exp cross vecdot matmul multi_dot householder_product
    """),
    "torch.fft": _names("""
        fft ifft rfft irfft fft2 ifft2 rfft2 irfft2 fftn ifftn rfftn irfftn hfft ihfft
        fftfreq rfftfreq fftshift ifftshift
    """),
    "torch.special": _names("""
        erf erfc erfinv expit logit log_softmax softmax logsumexp gammaln digamma psi
        polygamma multigammaln xlogy xlog1py log1p expm1 exp2 entr sinc i0 i0e i1 i1e ndtr
        ndtri log_ndtr round bessel_j0 bessel_j1
    """),
    "torch.cuda": _names("""
        is_available device_count current_device synchronize is_bf16_supported
        get_device_capability get_device_name memory_allocated max_memory_allocated
        memory_reserved max_memory_reserved reset_peak_memory_stats empty_cache
    """),
    "torch.cuda.amp": _names("autocast GradScaler"),
    # Reading the backend flags is harmless; setting them is monkeypatching (AST-ATTR-ASSIGN).
    "torch.backends": _names(""),
    "torch.backends.cuda": _names("""
        matmul is_flash_attention_available flash_sdp_enabled mem_efficient_sdp_enabled
        math_sdp_enabled
    """),
    "torch.backends.cudnn": _names("is_available enabled allow_tf32"),
    # --- torch: named refusals (the reason a miner reads) -----------------------------
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
    "torch.compile": (COMPILE, COMPILE_WHY),
    "torch.compiler": (COMPILE, COMPILE_WHY),
    "torch.jit": (COMPILE, COMPILE_WHY + " (torch.jit also loads serialised code)"),
    "torch.fx": (COMPILE, COMPILE_WHY + " (torch.fx generates and execs code)"),
    "torch.export": (COMPILE, COMPILE_WHY),
    "torch.autograd.graph": (INTROSPECT, "saved-tensor hooks observe the harness's graph"),
    "torch.autograd.profiler": (FILE, "profilers write trace files"),
    "torch.profiler": (FILE, "profilers write trace files"),
    "torch.onnx": (FILE, "exporters write files"),
    "torch.cuda.memory": (FFI, "pluggable allocators load shared libraries; snapshots write "
                          "files"),
    "torch.func.functional_call": (DYNAMIC, "functional_call sets attributes named by "
                                   "strings on a module"),
    **dict.fromkeys(
        ["torch.manual_seed", "torch.seed", "torch.initial_seed", "torch.get_rng_state",
         "torch.set_rng_state", "torch.Generator", "torch.random", "torch.cuda.manual_seed",
         "torch.cuda.manual_seed_all", "torch.cuda.get_rng_state", "torch.cuda.set_rng_state",
         "torch.cuda.set_rng_state_all"],
        (SEED, SEED_WHY),
    ),
    **dict.fromkeys(
        ["torch.set_default_dtype", "torch.set_default_device", "torch.set_num_threads",
         "torch.set_float32_matmul_precision", "torch.use_deterministic_algorithms",
         "torch.set_flush_denormal", "torch.set_printoptions"],
        (ATTR_ASSIGN, _GLOBAL_WHY),
    ),
    # --- standard library: pure helpers only --------------------------------------------
    "__future__": _names("annotations"),
    "math": _names("""
        acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist
        e erf erfc exp exp2 expm1 fabs factorial floor fmod frexp fsum gamma gcd hypot inf
        isclose isfinite isinf isnan isqrt lcm ldexp lgamma log log10 log1p log2 modf nan
        nextafter perm pi pow prod radians remainder sin sinh sqrt tan tanh tau trunc ulp
    """),
    "typing": _names("""
        Any Optional Union Callable Iterable Iterator Generator Sequence Mapping
        MutableMapping List Dict Tuple Set FrozenSet Type TypeVar Generic Protocol Literal
        Final ClassVar TYPE_CHECKING cast overload NoReturn Self Annotated TypeAlias
        ParamSpec Concatenate TypedDict
    """),
    "typing.get_type_hints": (DYNAMIC, "get_type_hints evaluates string annotations"),
    "typing.ForwardRef": (DYNAMIC, "ForwardRef evaluates strings as code"),
    "dataclasses": _names("dataclass field InitVar KW_ONLY"),
    "dataclasses.make_dataclass": (DYNAMIC, "write the dataclass out explicitly"),
    **dict.fromkeys(
        ["dataclasses.asdict", "dataclasses.astuple", "dataclasses.fields",
         "dataclasses.replace"],
        (INTROSPECT, "it reads every field of any dataclass, the harness's included; read "
         "your own fields by name"),
    ),
    "functools": _names("partial partialmethod reduce lru_cache cache cached_property"),
    **dict.fromkeys(
        ["functools.wraps", "functools.update_wrapper"],
        (INTROSPECT, "it copies every attribute of the wrapped object (the harness's private "
         "ones included) onto the wrapper; write the wrapper out"),
    ),
    "itertools": _names("""
        accumulate chain combinations combinations_with_replacement compress count
        cycle dropwhile filterfalse groupby islice pairwise permutations product repeat
        starmap takewhile tee zip_longest
    """),
    "collections": _names("OrderedDict defaultdict deque Counter ChainMap"),
    "collections.namedtuple": (DYNAMIC, "namedtuple builds a class whose attribute names are "
                               "data; write a dataclass"),
    "collections.abc": _names("""
        Callable Iterable Iterator Generator Sequence MutableSequence Mapping MutableMapping
        Sized Hashable Container Collection
    """),
    "enum": _names("Enum IntEnum StrEnum Flag IntFlag auto unique"),
    "abc": _names("ABC abstractmethod"),
    "numbers": _names("Number Complex Real Rational Integral"),
    "operator": _names("""
        add sub mul truediv floordiv mod pow neg pos abs matmul eq ne lt le gt ge not_ and_
        or_ xor itemgetter
    """),
    "operator.attrgetter": (DYNAMIC, "attribute access by string; write obj.name"),
    "operator.methodcaller": (DYNAMIC, "method call by string; write obj.name()"),
    # Clocks for throughput telemetry; never sleep (the budget is wall-clock).
    "time": _names("time time_ns perf_counter perf_counter_ns monotonic monotonic_ns"),
    "time.sleep": (PROCESS, "sleeping stalls the run; ctx.time_left() says how long is left"),
    "contextlib": _names("contextmanager nullcontext ExitStack suppress"),
    "contextlib.chdir": (FILE, "bundles do not touch the file system"),
    "copy": _names("copy deepcopy"),
    "warnings": _names("warn filterwarnings simplefilter"),
    **dict.fromkeys(
        ["warnings.formatwarning", "warnings.showwarning", "warnings.warn_explicit"],
        (FILE, _LINES_WHY),
    ),
    **dict.fromkeys(
        ["warnings.catch_warnings", "warnings.WarningMessage"],
        (INTROSPECT, "recorded warnings carry the file and line of the harness's frames; use "
         "warnings.filterwarnings"),
    ),
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
        "linecache traceback tokenize tabnanny pkgutil codecs doctest pydoc "
        "modulefinder".split(),
        "it reads files for another purpose (source lines, resources, encodings)",
    ),
    **dict.fromkeys(
        "subprocess multiprocessing threading _thread concurrent signal pty resource "
        "sched".split(),
        "processes, threads or signals",
    ),
    **dict.fromkeys(
        "ctypes cffi _ctypes importlib runpy zipimport imp builtins code codeop "
        "types".split(),
        "foreign or dynamically loaded code",
    ),
    **dict.fromkeys(
        "pickle cPickle _pickle marshal copyreg dill cloudpickle joblib safetensors numpy "
        "transformers huggingface_hub".split(),
        "deserialisation or pretrained weights",
    ),
    **dict.fromkeys(
        "base64 binascii zlib struct array hashlib hmac secrets uuid string".split(),
        "run-time decoding of embedded data, or string templates that read attributes",
    ),
    **dict.fromkeys(
        "gc inspect dis ast weakref ctypes.util sysconfig platform site atexit faulthandler "
        "tracemalloc".split(),
        "interpreter introspection (inspect also reads source files)",
    ),
    "random": "a second RNG beside torch's: draw with torch.rand/randn/randint/randperm, "
              "which the challenge seeds",
}


def modules() -> list[str]:
    """Every importable module, in table order."""
    return [k for k, v in PATHS.items() if isinstance(v, frozenset)]


def is_allowed_module(path: str) -> bool:
    return isinstance(PATHS.get(path), frozenset)


def lookup(dotted: str) -> Denial | None | bool:
    """The verdict on a dotted name: None (allowed), (rule, why), or False (no such module
    on the list: the import itself is what gets refused)."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        entry = PATHS.get(prefix)
        if isinstance(entry, tuple):
            return entry
        if entry is None:
            continue
        if k == len(parts) or parts[k] in entry:
            return None
        star = PATHS.get(prefix + ".*")
        if isinstance(star, tuple):
            return star
        return (MEMBER, member_why(prefix, parts[k]))
    return False


def member_why(module: str, name: str) -> str:
    """Why `module.name` is refused, naming what is allowed instead where that helps."""
    allowed = sorted(PATHS[module])  # type: ignore[arg-type]
    submodules = sorted(k.rsplit(".", 1)[1] for k in modules() if k.startswith(module + ".")
                        and "." not in k[len(module) + 1:])
    text = f"'{name}' is not on the allow-list of {module}"
    if len(allowed) + len(submodules) <= 12:
        return text + f" (it allows: {', '.join(allowed + submodules) or 'submodules only'})"
    close = difflib.get_close_matches(name, allowed + submodules, n=3, cutoff=0.6)
    if close:
        return text + f"; did you mean {', '.join(close)}?"
    return text + "; docs/gates.md lists what is allowed"


def import_why(module: str) -> str:
    root = module.split(".")[0]
    return IMPORT_WHY.get(module, IMPORT_WHY.get(root, "not on the allow-list"))


def allowed_summary() -> str:
    return ", ".join(modules())
