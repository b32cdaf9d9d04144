"""Hypotheses: structured, falsifiable claims over axes, and where a submission falls in one.

Every kind is a *contrast between cells* of the axis space. A submission in a cell is
compared with what the other cells of the same contrast predict for it; `sign` says whether
beating that prediction supports the claim (+1) or contradicts it (-1):

- single:      "arm `treatment` of `axis` gives lower bpb than arm `control`". Cells T, C.
- threshold:   "`axis` >= `threshold` gives lower bpb than below it" (or `better="below"`),
               on the raw value, so it can cut between bucket edges. Cells T, C.
- interaction: "the effect of a1 vs a0 on `axis_a` is more helpful when `axis_b` is b1 than
               when it is b0" (negative interaction contrast). Cells 11, 10, 01, 00.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from prism_challenge.registry.axes import AxisReading, AxisSpec, did_you_mean


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SingleFactor(_Spec):
    kind: Literal["single"] = "single"
    axis: str
    treatment: str
    control: str


class Threshold(_Spec):
    kind: Literal["threshold"] = "threshold"
    axis: str
    threshold: float
    better: Literal["above", "below"] = "above"


class Interaction(_Spec):
    kind: Literal["interaction"] = "interaction"
    axis_a: str
    a1: str
    a0: str
    axis_b: str
    b1: str
    b0: str


HypothesisSpec = Annotated[SingleFactor | Threshold | Interaction, Field(discriminator="kind")]
SPEC_ADAPTER: TypeAdapter = TypeAdapter(HypothesisSpec)

# The cells a contrast compares a submission in `cell` with, and the sign of each term in
# the prediction: pred = sum(sign_k * median(cell_k)).
PREDICTORS: dict[str, dict[str, list[tuple[str, int]]]] = {
    "pair": {"T": [("C", 1)], "C": [("T", 1)]},
    "grid": {
        "11": [("10", 1), ("01", 1), ("00", -1)],
        "00": [("10", 1), ("01", 1), ("11", -1)],
        "10": [("11", 1), ("00", 1), ("01", -1)],
        "01": [("11", 1), ("00", 1), ("10", -1)],
    },
}
CLAIM_SIGN = {"T": 1, "C": -1, "11": 1, "00": 1, "10": -1, "01": -1}


def axes_of(spec) -> tuple[str, ...]:
    if isinstance(spec, Interaction):
        return (spec.axis_a, spec.axis_b)
    return (spec.axis,)


def cells_of(spec) -> list[str]:
    return ["11", "10", "01", "00"] if isinstance(spec, Interaction) else ["T", "C"]


def predictors(spec) -> dict[str, list[tuple[str, int]]]:
    return PREDICTORS["grid" if isinstance(spec, Interaction) else "pair"]


def cell_of(spec, reading: AxisReading) -> str | None:
    """The cell a submission occupies, or None when it says nothing about this claim."""
    if isinstance(spec, SingleFactor):
        arm = reading.arms.get(spec.axis)
        return {spec.treatment: "T", spec.control: "C"}.get(arm)
    if isinstance(spec, Threshold):
        raw = reading.raw.get(spec.axis)
        if not isinstance(raw, float):
            return None
        above = raw >= spec.threshold
        return "T" if above == (spec.better == "above") else "C"
    a, b = reading.arms.get(spec.axis_a), reading.arms.get(spec.axis_b)
    ia = {spec.a1: "1", spec.a0: "0"}.get(a)
    ib = {spec.b1: "1", spec.b0: "0"}.get(b)
    return None if ia is None or ib is None else ia + ib


def cell_assignment(spec, cell: str) -> dict[str, str]:
    """What a miner sets to land in `cell` (arms; a threshold gives a readable bound)."""
    if isinstance(spec, SingleFactor):
        return {spec.axis: spec.treatment if cell == "T" else spec.control}
    if isinstance(spec, Threshold):
        above = (cell == "T") == (spec.better == "above")
        return {spec.axis: f"{'>=' if above else '<'}{spec.threshold:g}"}
    return {
        spec.axis_a: spec.a1 if cell[0] == "1" else spec.a0,
        spec.axis_b: spec.b1 if cell[1] == "1" else spec.b0,
    }


def check_against(spec, schema: list[AxisSpec]) -> None:
    """Refuse a claim over unknown axes or arms (ValueError says which)."""
    by_name = {a.name: a for a in schema}
    for name in axes_of(spec):
        if name not in by_name:
            hint = did_you_mean(name, by_name)
            raise ValueError(f"unknown axis {name!r}" + (f"; {hint}" if hint else ""))
    if isinstance(spec, SingleFactor):
        _two_arms(spec.axis, spec.treatment, spec.control, by_name[spec.axis].arms)
    elif isinstance(spec, Threshold):
        axis = by_name[spec.axis]
        if axis.kind == "categorical" or not axis.low < spec.threshold < axis.high:
            raise ValueError(f"{spec.axis}: threshold must lie inside a numeric axis's bounds")
    else:
        if spec.axis_a == spec.axis_b:
            raise ValueError("an interaction needs two different axes")
        for name, x1, x0 in ((spec.axis_a, spec.a1, spec.a0), (spec.axis_b, spec.b1, spec.b0)):
            _two_arms(name, x1, x0, by_name[name].arms)


def _two_arms(axis: str, first: str, second: str, arms: list[str]) -> None:
    """A contrast needs two different arms the axis has; a misspelt arm gets the close ones."""
    if first != second and not {first, second} - set(arms):
        return
    hints = [f"{x!r}: {h}" for x in dict.fromkeys((first, second))
             if x not in arms and (h := did_you_mean(x, arms))]
    raise ValueError(f"{axis}: need two different arms of {arms}"
                     + "".join(f"; {h}" for h in hints))


def canonical_key(spec) -> str:
    """A normal form: the same claim written another way (a mirrored single factor, swapped
    interaction axes) gets the same key, so duplicates are caught whatever their wording."""
    if isinstance(spec, SingleFactor):
        pair = sorted([spec.treatment, spec.control])
        return f"single|{spec.axis}|{pair[0]}|{pair[1]}"
    if isinstance(spec, Threshold):
        return f"threshold|{spec.axis}|{spec.threshold:.6g}"
    sides = sorted(
        [(spec.axis_a, *sorted([spec.a1, spec.a0])), (spec.axis_b, *sorted([spec.b1, spec.b0]))]
    )
    return "interaction|" + "|".join("|".join(s) for s in sides)


def statement(spec) -> str:
    if isinstance(spec, SingleFactor):
        return f"{spec.axis}={spec.treatment} gives lower bpb than {spec.axis}={spec.control}"
    if isinstance(spec, Threshold):
        side = ">=" if spec.better == "above" else "<"
        return f"{spec.axis} {side} {spec.threshold:g} gives lower bpb than the other side"
    return (
        f"{spec.axis_a}={spec.a1} (vs {spec.a0}) helps more when {spec.axis_b}={spec.b1} "
        f"than when {spec.axis_b}={spec.b0}"
    )
