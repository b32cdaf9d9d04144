"""The supported torch range: the installed build passes, others are named with the fix."""

from __future__ import annotations

import pytest

from prism_challenge.sandbox.torch_support import SUPPORTED, UnsupportedTorch, check_torch


@pytest.mark.parametrize("version", ["2.11.0+cu130", "2.12.1", "2.13.0+cpu", "2.13.0a0+git5d1e"])
def test_builds_in_the_range_pass(version):
    assert check_torch(version) == version


@pytest.mark.parametrize("version", ["2.10.0+cu128", "2.14.0", "3.0.0", "garbage"])
def test_builds_outside_the_range_are_named_with_the_fix(version):
    with pytest.raises(UnsupportedTorch) as caught:
        check_torch(version)
    assert str(caught.value) == (
        f"torch {version} is not supported: PRISM runs on torch {SUPPORTED}; install a "
        f"supported build (e.g. pip install 'torch{SUPPORTED}' from your CUDA wheel index)")


def test_the_installed_torch_is_supported():
    import torch

    assert check_torch() == torch.__version__
