"""What outlives a model in the evaluation process is put back before every build
(sandbox/harness/shared_state.py), in this test process: each write a bundle can make
through an allowed name, and the list of modules it walks against the AST policy's."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from prism_challenge.gates.allowlist import PATHS  # noqa: E402
from prism_challenge.sandbox.harness.shared_state import MODULES, SharedState  # noqa: E402


def test_the_walked_modules_are_the_ones_a_bundle_may_import():
    assert set(MODULES) == {k for k, v in PATHS.items() if isinstance(v, frozenset)}


@pytest.fixture
def shared():
    state = SharedState()
    yield state
    state.restore()


def test_every_write_through_an_allowed_name_is_put_back(shared):
    from torch import nn
    from torch.nn.attention import SDPBackend, sdpa_kernel

    holder = nn.Identity
    holder.prism_seen = [1, 2]
    module = nn.Module
    module.dump_patches = not module.dump_patches
    init = torch.nn.init.xavier_uniform_
    init.prism_seen = 3
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    matmul.allow_tf32 = not before
    held = sdpa_kernel([SDPBackend.MATH])
    held.__enter__()
    warnings.filterwarnings("error", message="prism-seen-7")
    shared.restore()
    assert not hasattr(nn.Identity, "prism_seen") and not hasattr(init, "prism_seen")
    assert nn.Module.dump_patches is False
    assert matmul.allow_tf32 == before
    assert torch.backends.cuda.flash_sdp_enabled()
    assert warnings.filters == shared.filters


def test_a_clean_process_is_left_as_it_is(shared):
    from torch import nn

    forward = nn.Linear.forward
    shared.restore()
    assert nn.Linear.forward is forward and not shared._classes_changed()
