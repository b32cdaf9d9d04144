"""Every example bundle passes the validator's static gates and declares schema axes."""

from __future__ import annotations

import pytest
from miner_kit import EXAMPLE_NAMES, EXAMPLES

from prism_challenge.bundle import Bundle
from prism_challenge.gates import check_policy
from prism_challenge.miner import static_findings
from prism_challenge.registry import DEFAULT_AXES, validate_declared
from prism_challenge.registry.axes import read_axes


def test_there_is_a_baseline_and_at_least_two_variants():
    assert "baseline" in EXAMPLE_NAMES
    assert len(EXAMPLE_NAMES) >= 3


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_passes_policy_contract_and_axis_schema(name):
    bundle = Bundle.from_dir(EXAMPLES / name)
    assert check_policy(bundle.files) == []
    assert bundle.meta.name and bundle.meta.description
    assert bundle.meta.axes, "every example declares its axes in prism.toml"
    assert validate_declared(DEFAULT_AXES, dict(bundle.meta.axes)) == []
    assert [f.status for f in static_findings(bundle)] == ["pass", "pass"]


def test_variants_differ_from_the_baseline_on_different_axes():
    def declared(name):
        reading = read_axes(DEFAULT_AXES, None, dict(Bundle.from_dir(EXAMPLES / name).meta.axes))
        assert reading.flags == []
        return reading.arms

    base, conv, muon = declared("baseline"), declared("conv_mixer"), declared("muon")
    assert {k for k in base if base[k] != conv.get(k)} == {"norm", "position"}
    assert {k for k in base if base[k] != muon.get(k)} == {"optimizer"}
    assert (conv["norm"], conv["position"], muon["optimizer"]) == ("rmsnorm", "none", "muon")
    # small_batch differs on a measured axis only (batch_size), checked in its sandbox run
    assert declared("small_batch") == base


def test_static_findings_name_each_problem():
    bundle = Bundle.from_dir(EXAMPLES / "baseline")
    files = dict(bundle.files)
    files["training.py"] = b"import os\n\n\ndef train(ctx):\n    os.system('true')\n"
    files["prism.toml"] = b'[axes]\nnorm = "batchnorm"\nmixer = "attention"\n'
    findings = static_findings(Bundle(files))
    failed = [f for f in findings if f.status == "fail"]
    assert {f.check for f in failed} == {"policy", "axes"}
    assert any("training.py:1" in f.detail for f in failed if f.check == "policy")
    axes = " | ".join(f.detail for f in failed if f.check == "axes")
    assert "'batchnorm' is not one of" in axes and "unknown axis 'mixer'" in axes


def test_a_misspelt_axis_names_the_closest_known_ones():
    bundle = Bundle.from_dir(EXAMPLES / "baseline")
    files = dict(bundle.files)
    files["prism.toml"] = b'[axes]\noptimiser = "adamw"\nbatchsize = 32\nheads = 8\nlr = 1e-3\n'
    failed = [f.detail for f in static_findings(Bundle(files)) if f.status == "fail"]
    known = "batch_size, compile, layers, lr, norm, optimizer, params, position, precision"
    assert failed == [
        "prism.toml [axes]: unknown axis 'batchsize'; did you mean 'batch_size'? rename or "
        f"remove it in prism.toml [axes] (known: {known})",
        f"prism.toml [axes]: unknown axis 'heads'; rename or remove it in prism.toml [axes] "
        f"(known: {known})",
        "prism.toml [axes]: unknown axis 'optimiser'; did you mean 'optimizer'? rename or "
        f"remove it in prism.toml [axes] (known: {known})"]
