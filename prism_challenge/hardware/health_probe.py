"""Entry point of a slot's HEALTH PROBE: `python -m prism_challenge.hardware.health_probe`.

Runs inside the sandbox with exactly the slot's devices and cores, before the slot takes a
run. Checks that the process is held to the slot's cores, that the slot's device nodes (and
no others) are visible, that a small matmul on the CPU is exact, and, with a CUDA build of
torch, that every GPU answers, has the expected free memory and multiplies like the CPU.
With `PRISM_PROBE_COMPILE=1` it also compiles a tiny model with `torch.compile` on the slot's
first GPU (or the CPU on a CPU slot) and compares it with eager: an environment that cannot
compile (no C++ compiler for inductor, a broken triton, an unwritable cache) is the host's
fault, found here before a miner's compiled model crashes on it.
Prints one JSON line: {"problems": [...], "notes": [...], ...}. Must stay cheap on a CPU host
(numpy only; torch is imported only when the slot has GPUs or compile is probed).
"""

from __future__ import annotations

import json
import os
import re

SIZE = 64


def _ints(name: str) -> list[int]:
    value = os.environ.get(name, "")
    return [int(v) for v in value.split(",") if v.strip()]


def _cpu_matmul() -> str | None:
    import numpy as np

    a = (np.arange(SIZE * SIZE).reshape(SIZE, SIZE) % 7).astype(np.float64)
    b = (np.arange(SIZE * SIZE).reshape(SIZE, SIZE).T % 5).astype(np.float64)
    exact = a.astype(np.int64) @ b.astype(np.int64)  # integer path: no BLAS involved
    if not np.array_equal(a @ b, exact.astype(np.float64)):
        return "CPU matmul differs from the exact integer result"
    return None


def _gpus(count: int, min_free: float, notes: list[str]) -> list[str]:
    import torch

    if torch.version.cuda is None:
        notes.append("this torch build has no CUDA: GPU compute not probed")
        return []
    if not torch.cuda.is_available() or torch.cuda.device_count() != count:
        seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return [f"CUDA sees {seen} GPU(s), the slot has {count}"]
    problems = []
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 256, generator=gen, dtype=torch.float32)
    reference = x @ x
    for i in range(count):
        free, total = torch.cuda.mem_get_info(i)
        if free < min_free * total:
            problems.append(f"GPU {i}: {free >> 20} of {total >> 20} MiB free")
        got = (x.to(f"cuda:{i}") @ x.to(f"cuda:{i}")).cpu()
        torch.cuda.synchronize(i)
        if not torch.allclose(got, reference, rtol=1e-2, atol=1e-2):
            err = float((got - reference).abs().max())
            problems.append(f"GPU {i}: matmul differs from the CPU by {err:.3g}")
    return problems


def _compile(gpu_slot: bool, notes: list[str]) -> str | None:
    import torch

    if gpu_slot and not torch.cuda.is_available():
        notes.append("torch.compile not probed: CUDA is not usable here")
        return None
    device = "cuda:0" if gpu_slot else "cpu"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                torch.nn.Linear(32, 8)).to(device)
    x = torch.randn(4, 16, device=device)
    try:
        got = torch.compile(model)(x)
    except Exception as exc:  # any failure of the toolchain is the environment's
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"torch.compile fails in the sandbox on {device}: {type(exc).__name__}: {first}"
    want = model(x)
    if not torch.allclose(got, want, rtol=1e-3, atol=1e-4):
        return (f"torch.compile on {device} differs from eager by "
                f"{float((got - want).abs().max()):.3g}")
    notes.append(f"torch.compile ok on {device}")
    return None


def main() -> int:
    problems: list[str] = []
    notes: list[str] = []
    want_cpus = _ints("PRISM_PROBE_CPUS")
    cpus = sorted(os.sched_getaffinity(0))
    if want_cpus and cpus != want_cpus:
        problems.append(f"runs on CPU cores {cpus}, the slot has {want_cpus}")
    want_nodes = sorted(_ints("PRISM_PROBE_MINORS"))
    nodes = sorted(int(n[6:]) for n in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", n))
    if nodes != want_nodes:
        problems.append(f"sees device nodes {nodes}, the slot has {want_nodes}")
    mismatch = _cpu_matmul()
    if mismatch:
        problems.append(mismatch)
    if want_nodes and not problems:
        try:
            problems += _gpus(len(want_nodes), float(os.environ.get("PRISM_PROBE_MIN_FREE", "0")),
                              notes)
        except Exception as exc:  # a driver fault surfaces as any exception type
            problems.append(f"GPU probe failed: {type(exc).__name__}: {exc}"[:500])
    if os.environ.get("PRISM_PROBE_COMPILE") == "1" and not problems:
        failed = _compile(bool(want_nodes), notes)
        if failed:
            problems.append(failed[:500])
    print(json.dumps({"problems": problems, "notes": notes, "cpus": cpus, "nodes": nodes,
                      "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
