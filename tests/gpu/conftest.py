"""Tests that need a real CUDA GPU: marked `gpu`, skipped cleanly where CUDA is absent.

Run them on a GPU host with `pytest -m gpu`. Everything is real: bubblewrap, the rank
launcher, the GPU the runner finds (`sandbox.gpus: []` = every GPU of the host)."""

from __future__ import annotations

import pytest


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    cuda = _cuda()
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)
            if not cuda:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (none on this host)"))
