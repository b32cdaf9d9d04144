"""A fake GPU host: a fake `nvidia-smi` on PATH and stand-in device nodes (GPUs cannot run
here; everything else — bubblewrap, torchrun, the runner, the store — is real)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpu_kit import FakeGpuHost


@pytest.fixture
def gpu_host(tmp_path, monkeypatch) -> FakeGpuHost:
    """Its stand-in GPUs cannot run CUDA: sandboxes placed on them run on the CPU, so the
    runner's check that an assigned GPU is usable is off (tested on its own)."""
    from prism_challenge.sandbox.runner import Runner

    host = FakeGpuHost(tmp_path / "gpu-host", count=4)
    monkeypatch.setenv("PATH", f"{host.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(Runner, "cuda_required", False)
    return host


@pytest.fixture
def no_nvidia_smi(monkeypatch, tmp_path):
    """A PATH without nvidia-smi (this machine has none; make sure of it)."""
    empty = Path(tmp_path / "empty-bin")
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin")
