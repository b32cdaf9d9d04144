"""Fake GPUs at the lowest seam: what `nvidia-smi` prints and the /dev nodes bwrap binds."""

from __future__ import annotations

import json
from pathlib import Path

TOTAL_MIB = 81559
TINY_BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "sandbox" / "tiny"


def uuid(i: int) -> str:
    return f"GPU-{i}f3c2a1b-7d4e-4c1a-9b2e-5a6d7c8e9f0{i}"


class FakeGpuHost:
    """`count` GPUs; `set(i, ...)` changes what nvidia-smi reports for GPU i."""

    def __init__(self, root: Path, count: int) -> None:
        self.root = root
        self.bin = root / "bin"
        self.dev = root / "dev"
        self.state = root / "nvidia-smi.csv"
        self.exit_code = root / "nvidia-smi.rc"
        for d in (self.bin, self.dev):
            d.mkdir(parents=True)
        for name in [f"nvidia{i}" for i in range(count)] + ["nvidiactl", "nvidia-uvm",
                                                             "nvidia-uvm-tools"]:
            (self.dev / name).write_text(name)
        self.rows = {i: [str(i), uuid(i), f"00000000:{0x18 + i:02X}:00.0", str(TOTAL_MIB), "1"]
                     for i in range(count)}
        self.exit_code.write_text("0")
        smi = self.bin / "nvidia-smi"
        smi.write_text(f'#!/bin/sh\ncat "{self.state}"\nexit "$(cat "{self.exit_code}")"\n')
        smi.chmod(0o755)
        self._write()

    def set(self, i: int, *, total: str | None = None, used: str | None = None) -> None:
        if total is not None:
            self.rows[i][3] = total
        if used is not None:
            self.rows[i][4] = used
        self._write()

    def _write(self) -> None:
        self.state.write_text("".join(", ".join(r) + "\n" for r in self.rows.values()))


# An architecture that records, from inside each sandbox process that loads it or runs its
# forward (the eval answers each task in a process of its own), what it can see:
# CUDA_VISIBLE_DEVICES, the GPU nodes in /dev, its CPU cores, and torchrun's variables.
SEEN_PRELUDE = b'''
import json as _json, os as _os


def _note():
    seen = {"cuda_visible_devices": _os.environ.get("CUDA_VISIBLE_DEVICES"),
            "nodes": sorted(n for n in _os.listdir("/dev") if n.startswith("nvidia")),
            "cpus": sorted(_os.sched_getaffinity(0)),
            "rank": _os.environ.get("RANK"), "world_size": _os.environ.get("WORLD_SIZE"),
            "torchelastic": "TORCHELASTIC_RUN_ID" in _os.environ}
    with open(f"/scratch/seen-{_os.getpid()}.json", "w") as fh:
        _json.dump(seen, fh)


_note()
_tiny_forward = Tiny.forward


def _noting_forward(self, input_ids):
    _note()
    return _tiny_forward(self, input_ids)


Tiny.forward = _noting_forward
'''


def seeing_bundle(train: bytes = b"def train(ctx):\n    return\n") -> dict[str, bytes]:
    arch = (TINY_BUNDLE / "architecture.py").read_bytes()
    return {"architecture.py": arch + SEEN_PRELUDE, "training.py": train}


def seen(scratch: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(scratch.glob("seen-*.json"))]
