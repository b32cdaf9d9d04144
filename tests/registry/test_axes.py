import pytest
from pydantic import ValidationError

from prism_challenge.registry.axes import DEFAULT_AXES, AxisSpec, read_axes, validate_declared
from tests.registry.conftest import measured


def test_numeric_arms_bucket_by_edges():
    lr = next(a for a in DEFAULT_AXES if a.name == "lr")
    assert lr.arms == ["<0.0001", "0.0001-0.001", "0.001-0.01", ">=0.01"]
    assert lr.arm_of(3e-4) == "0.0001-0.001"
    assert lr.arm_of(1e-3) == "0.001-0.01"  # an edge belongs to the bucket above it
    assert lr.arm_of(5.0) == ">=0.01"


@pytest.mark.parametrize(
    "kw",
    [
        {"kind": "categorical", "values": [f"v{i}" for i in range(9)]},  # > 8 values
        {"kind": "categorical", "values": ["a", "a"]},
        {"kind": "logfloat", "low": 0.0, "high": 1.0, "edges": [0.5]},  # log needs low > 0
        {"kind": "int", "low": 0, "high": 10, "edges": [5, 3]},  # not increasing
        {"kind": "float", "low": 0, "high": 10, "edges": [12]},  # edge outside
        {"kind": "float", "low": 0, "high": float("inf"), "edges": [1]},  # unbounded
        {"kind": "int", "low": 0, "high": 10, "edges": list(range(1, 9))},  # 9 arms
    ],
)
def test_unbounded_or_oversized_axes_are_refused(kw):
    with pytest.raises(ValidationError):
        AxisSpec(name="x", **kw)


def test_measured_axes_are_read_and_bucketed():
    r = read_axes(DEFAULT_AXES, measured(opt="AdamW", lr=3e-3, params=2_000_000), {})
    assert r.arms["optimizer"] == "adamw"
    assert r.arms["params"] == "1e+06-1e+07"
    assert r.arms["lr"] == "0.001-0.01"
    assert r.arms["compile"] == "false"
    assert r.raw["lr"] == 3e-3
    assert r.flags == []


def test_unknown_optimizer_maps_to_other():
    r = read_axes(DEFAULT_AXES, measured(opt="MyShampoo"), {})
    assert r.arms["optimizer"] == "other"


def test_declared_contradicting_measured_is_flagged_and_measured_wins():
    r = read_axes(DEFAULT_AXES, measured(layers=8), {"layers": 12})
    assert r.raw["layers"] == 8
    assert any("contradiction: layers declared 12.0, measured 8.0" in f for f in r.flags)


def test_declared_norm_without_the_module_is_flagged():
    r = read_axes(DEFAULT_AXES, measured(census={"LayerNorm": 3}), {"norm": "rmsnorm"})
    assert r.arms["norm"] == "rmsnorm"
    assert any("no ['RMSNorm'] in the model" in f for f in r.flags)
    ok = read_axes(DEFAULT_AXES, measured(census={"RMSNorm": 3}), {"norm": "RMSNorm"})
    assert ok.arms["norm"] == "rmsnorm" and ok.flags == []


def test_bad_declared_values_are_flagged_not_used():
    r = read_axes(DEFAULT_AXES, measured(), {"position": "sinusoid", "bogus": 1, "norm": 3})
    assert "position" not in r.arms and "norm" not in r.arms
    assert len(r.flags) == 3
    assert validate_declared(DEFAULT_AXES, {"position": "rope", "lr": 1e-3}) == []
    problems = validate_declared(DEFAULT_AXES, {"position": "sinusoid", "bogus": 1, "lr": 99.0})
    assert len(problems) == 3


def test_a_misspelt_declared_axis_gets_the_closest_known_name():
    """The validator's flag and `validate_declared` name the axis a misspelling meant, as
    `prism check` does; a name close to none gets no guess."""
    r = read_axes(DEFAULT_AXES, measured(), {"optimiser": "adamw", "heads": 8})
    assert r.flags == ["unknown declared axis 'heads' ignored",
                       "unknown declared axis 'optimiser' ignored; did you mean 'optimizer'?"]
    known = "batch_size, compile, layers, lr, norm, optimizer, params, position, precision"
    assert validate_declared(DEFAULT_AXES, {"batchsize": 32, "heads": 8}) == [
        "unknown axis 'batchsize'; did you mean 'batch_size'? rename or remove it in "
        f"prism.toml [axes] (known: {known})",
        f"unknown axis 'heads'; rename or remove it in prism.toml [axes] (known: {known})"]


@pytest.mark.parametrize(("harness", "arm"), [("bfloat16", "bf16"), ("float16", "fp16"),
                                              ("fp32", "fp32"), ("float8", "other")])
def test_every_precision_the_harness_records_has_its_arm(harness, arm):
    r = read_axes(DEFAULT_AXES, measured(precision=harness), {})
    assert r.arms["precision"] == arm
    assert r.flags == []


def test_a_correct_bf16_declaration_is_no_contradiction():
    ok = read_axes(DEFAULT_AXES, measured(precision="bfloat16"), {"precision": "bf16"})
    assert ok.arms["precision"] == "bf16" and ok.flags == []
    wrong = read_axes(DEFAULT_AXES, measured(precision="fp32"), {"precision": "bf16"})
    assert wrong.flags == ["contradiction: precision declared 'bf16', measured 'fp32'"]


def test_the_optimizer_axis_is_the_one_that_moved_most():
    m = measured()
    m["optimizers"] = [{"cls": "Muon", "hparams": {"lr": 0.5}, "steps": 1, "moved": 10},
                       {"cls": "AdamW", "hparams": {"lr": 3e-3}, "steps": 90, "moved": 9000}]
    r = read_axes(DEFAULT_AXES, m, {})
    assert r.arms["optimizer"] == "adamw" and r.raw["lr"] == 3e-3
