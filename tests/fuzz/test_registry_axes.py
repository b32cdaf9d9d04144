"""Property tests of the registry's axis declarations: a miner's `[axes]` table and an LLM's
proposed axis, both outside input.

What must hold: `read_axes` never raises on a miner's declaration (it flags what it refuses)
and places a submission only on arms the schema has, with raw values inside the bounds;
`validate_declared` (`prism check`) never raises and agrees with `read_axes`; a proposed
axis either passes the gate as a bounded axis of at most 8 arms or is refused with a reason.
"""

from __future__ import annotations

import math

from fuzz_kit import PROPERTY, valid_files
from hypothesis import example, given
from hypothesis import strategies as st

from prism_challenge.bundle import MANIFEST, Bundle, BundleError
from prism_challenge.registry.axes import (
    DEFAULT_AXES,
    MAX_ARMS,
    AxisSpec,
    read_axes,
    validate_declared,
)
from prism_challenge.registry.proposals import gate_axis
from prism_challenge.registry.state import RegistryState
from prism_challenge.sandbox.record import MeasuredAxes

SPECS = {a.name: a for a in DEFAULT_AXES}
_scalar = st.one_of(
    st.booleans(), st.integers(), st.integers(-(2**63), 2**63 - 1), st.floats(),
    st.text(max_size=12),
    st.sampled_from([10**400, -(10**400), "RMSNorm ", " rope", "true", "other", 4096, 1e10]),
    st.sampled_from(sorted({v for a in DEFAULT_AXES for v in a.values})),
)
_declared = st.dictionaries(st.one_of(st.sampled_from(sorted(SPECS)), st.text(max_size=8)),
                            _scalar, max_size=6)
_measured = st.one_of(st.none(), st.builds(
    MeasuredAxes, param_count=st.integers(0, 10**12), layer_count=st.integers(0, 10**5),
    module_census=st.dictionaries(st.sampled_from(["LayerNorm", "RMSNorm", "Linear"]),
                                  st.integers(0, 50), max_size=3)))


@PROPERTY
@given(declared=_declared, measured=_measured)
@example(declared={"layers": 10**400}, measured=None)  # once an OverflowError (int -> float)
@example(declared={"params": -(10**400), "lr": math.nan}, measured=None)
def test_a_declaration_never_raises_and_lands_only_on_real_arms(declared, measured):
    reading = read_axes(DEFAULT_AXES, measured, declared)
    for name, arm in reading.arms.items():
        spec = SPECS[name]
        assert arm in spec.arms
        raw = reading.raw[name]
        if spec.kind != "categorical":
            assert spec.low <= raw <= spec.high
    assert all(isinstance(flag, str) and flag for flag in reading.flags)
    problems = validate_declared(DEFAULT_AXES, declared)
    assert all(isinstance(p, str) and p for p in problems)
    accepted = {n for n in declared if n in SPECS and not _refused(SPECS[n], declared[n])}
    assert len(problems) == len(declared) - len(accepted)


def _refused(spec: AxisSpec, value) -> bool:
    try:
        spec.coerce(value)
    except ValueError:
        return True
    return False


@PROPERTY
@given(axes=st.dictionaries(st.sampled_from(sorted(SPECS)), _scalar.map(repr), max_size=4))
def test_a_prism_toml_axes_table_reaches_the_registry_without_an_exception(axes):
    lines = [f"{name} = {value.lower() if value in ('True', 'False') else value}"
             for name, value in axes.items()]
    toml = ("[axes]\n" + "\n".join(lines) + "\n").encode()
    try:
        bundle = Bundle({**valid_files("axes"), MANIFEST: toml})
    except BundleError as exc:
        assert exc.rule in {"BUNDLE_TOML", "BUNDLE_META", "BUNDLE_SIZE"}
        return
    reading = read_axes(DEFAULT_AXES, None, dict(bundle.meta.axes))
    assert set(reading.arms) <= set(axes)


_bound = st.one_of(st.none(), st.floats(), st.integers(-5, 5), st.sampled_from([1e308, -0.0]))
_axis_doc = st.fixed_dictionaries(
    {"name": st.one_of(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), st.text()),
     "kind": st.sampled_from(["int", "float", "logfloat", "categorical", "weird"])},
    optional={"low": _bound, "high": _bound,
              "edges": st.lists(st.one_of(st.floats(), st.integers(-10, 10)), max_size=9),
              "values": st.lists(st.one_of(st.text(max_size=6),
                                           st.from_regex(r"[a-z]{1,4}", fullmatch=True)),
                                 max_size=10),
              "source": st.sampled_from(["declared", "measured", "x"]),
              "description": st.text(max_size=10), "census": st.just({})},
)
_proposal = st.one_of(
    st.fixed_dictionaries({"spec": _axis_doc, "treatment": st.text(max_size=8),
                           "control": st.text(max_size=8)},
                          optional={"rationale": st.text(max_size=20)}),
    st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.integers(), st.text()),
                    max_size=3),
)


@PROPERTY
@given(raw=_proposal)
@example(raw={"spec": {"name": "width", "kind": "int", "low": 1, "high": 100, "edges": [10, 50]},
              "treatment": ">=50", "control": "<10"})
def test_a_proposed_axis_passes_bounded_or_is_refused_with_a_reason(raw):
    prop, why = gate_axis(raw, RegistryState())
    if prop is None:
        assert isinstance(why, str) and why and why != "ok"
        return
    spec = prop.spec
    assert why == "ok" and spec.source == "declared"
    assert 2 <= len(spec.arms) <= MAX_ARMS
    assert prop.treatment in spec.arms and prop.control in spec.arms
    if spec.kind != "categorical":
        for value in (spec.low, spec.high, *spec.edges):
            if spec.kind != "int" or float(value).is_integer():
                assert spec.arm_of(spec.coerce(value)) in spec.arms
