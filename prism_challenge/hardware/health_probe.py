"""Entry point of a slot's HEALTH PROBE: `python -m prism_challenge.hardware.health_probe`.

Runs inside the sandbox with exactly the slot's devices and cores, before the slot takes a
run. Checks that the process is held to the slot's cores, that the slot's device nodes (and
no others) are visible, that a small matmul on the CPU is exact, and, with a CUDA build of
torch, that every GPU answers, has the expected free memory and multiplies like the CPU.
Prints one JSON line: {"problems": [...], "notes": [...], ...}. Must stay cheap on a CPU host
(numpy only; torch is imported only when the slot has GPUs).
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
    print(json.dumps({"problems": problems, "notes": notes, "cpus": cpus, "nodes": nodes,
                      "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
