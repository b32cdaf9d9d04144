"""Seeds and deterministic flags, set before any miner code is imported, and the modes
each eval task starts from."""

from __future__ import annotations

import os
import random
import sys


def make_deterministic(seed: int, threads: int) -> None:
    """Seeds always; torch's deterministic algorithms and cuDNN's deterministic flag unless
    the validator turned them off (`PRISM_DETERMINISTIC=0`, `sandbox.deterministic_algorithms`).
    cuDNN autotuning stays off either way: it picks kernels by timing, run by run.

    The mode is strict, not warn-only: with `warn_only=True` torch keeps non-deterministic
    kernels and only warns (scaled_dot_product_attention's memory-efficient backward splits
    its key reduction), and a same-stack replay of an honest GPT then drifts by 1e-3 within
    100 steps. Strict, those kernels take their deterministic path, and an op that has none
    raises at once, in the miner's own `prism eval`, instead of failing a replay later."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    strict = os.environ.get("PRISM_DETERMINISTIC", "1") != "0"
    torch.set_num_threads(threads)
    deterministic_algorithms(strict)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = strict
    seed_everything(seed)


def deterministic_algorithms(strict: bool) -> None:
    """What `torch.use_deterministic_algorithms(strict, warn_only=False)` sets, without its
    import of inductor (as long again as `import torch`, in every sandbox, for runs that
    mostly never compile). Inductor's own flag is set where inductor reads it when first
    imported (its environment variable), or on its config if something imported it already;
    `inductor_deterministic` checks it wherever a model is compiled."""
    import torch

    config = sys.modules.get("torch._inductor.config")
    if config is not None:
        config.deterministic = strict
    else:
        os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1" if strict else "0"
    torch._C._set_deterministic_algorithms(strict, warn_only=False)


def held_out_mode(held_out: bool, strict: bool) -> None:
    """The deterministic mode for the eval sandbox's next task. Held-out tasks (the trained
    model and its twin) always run with it on, warn-only where the run had it off: then
    torch fills every uninitialised tensor (NaN, or an integer's largest value), so memory
    a task freed cannot carry what it saw to the next. A replay snapshot runs in the run's
    own mode, so its arithmetic is the training's."""
    import torch

    torch._C._set_deterministic_algorithms(held_out or strict,
                                           warn_only=held_out and not strict)


def task_modes(device):
    """The thread's modes as a task starts from: inference mode off, gradients on (the task
    then sets its own), autocast off on the CPU and on `device`. A model that enters a mode
    and never leaves it (a context entered in an ExitStack it keeps) would otherwise hand
    the next task a bit it can read, and change how the next model is built."""
    import contextlib

    import torch

    stack = contextlib.ExitStack()
    stack.enter_context(torch.inference_mode(False))
    stack.enter_context(torch.enable_grad())
    for kind in dict.fromkeys(("cpu", device.type)):
        stack.enter_context(torch.autocast(device_type=kind, enabled=False))
    return stack


def inductor_deterministic() -> None:
    """Before a compile: inductor's flag agrees with torch's global mode (a build whose
    inductor did not read the environment variable gets it set here)."""
    import torch
    import torch._inductor.config as config

    config.deterministic = torch.are_deterministic_algorithms_enabled()


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    # seeds every CUDA device too, lazily: nothing here starts CUDA (the eval process forks
    # its task processes after seeding, and a CUDA context does not survive a fork)
    torch.manual_seed(seed)


def software_stack() -> dict:
    """The software this process computes with, reported at the first hello (before any of
    the miner's code is imported): a replay on another stack is not comparable."""
    import torch

    cuda = torch.version.cuda if torch.cuda.is_available() else None
    # cuDNN's version comes with the ready (`cudnn_version`): reading it starts CUDA, which
    # the miner's build must find unstarted
    return {"torch": torch.__version__, "cuda": cuda, "cudnn": None,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "start": os.environ.get("PRISM_START", "cold")}


def cudnn_version() -> int | None:
    """cuDNN's version once this process has started CUDA (the harness has moved the model
    to the GPU); None on the CPU."""
    import torch

    return torch.backends.cudnn.version() if torch.cuda.is_initialized() else None
