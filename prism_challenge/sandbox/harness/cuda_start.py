"""Where CUDA was started in this process, so that "CUDA started before training" names the
line that did it: the miner's (a build that touched the GPU) or the framework's (then it is
the host's fault, found before any of the miner's code ran).

The eval forks one process per held-out task from the process that built the model, and a
CUDA context does not survive a fork, so the build must leave CUDA unstarted. torch starts
CUDA in one place (`torch.cuda._lazy_init` calls `torch._C._cuda_init`, whatever asked: a
tensor on the GPU, a device query, a pinned buffer); wrapping that call records its stack.
"""

from __future__ import annotations

import traceback

_STARTED: list[traceback.FrameSummary] = []


def watch() -> None:
    """From now on, the first CUDA start of this process records its stack (idempotent)."""
    import torch

    init = getattr(torch._C, "_cuda_init", None)
    if init is None or getattr(init, "_prism_watch", False):
        return

    def first_start(*args, **kwargs):
        if not _STARTED:
            _STARTED.extend(traceback.extract_stack()[:-1])
        return init(*args, **kwargs)

    first_start._prism_watch = True  # type: ignore[attr-defined]
    torch._C._cuda_init = first_start


def started() -> bool:
    import torch

    return torch.cuda.is_initialized()


def where(folder: str | None = None) -> str:
    """The start's innermost frame in `folder` (the miner's bundle), else its last frames
    outside torch; "" when the start was not seen (no watch, or a fork of a started parent)."""
    if not _STARTED:
        return ""
    if folder is not None:
        own = [f for f in _STARTED if f.filename.startswith(folder.rstrip("/") + "/")]
        if own:
            f = own[-1]
            return f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} ({f.line or f.name})"
    outside = [f for f in _STARTED if "/torch/" not in f.filename] or _STARTED
    return " <- ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno} {f.name}"
                       for f in reversed(outside[-4:]))

