"""The axis schema: typed, bounded descriptions of a submission, and reading one submission.

An axis turns a raw value (a parameter count, an optimiser class, a declared norm) into an
*arm*: a categorical value, or the bucket of a number between fixed edges. Hypotheses speak
only about arms, so every axis has at most 8 of them. Measured axes come from the harness
(`MeasuredAxes`) and win over what a miner declares in `prism.toml`; a declaration that
disagrees with a measurement is kept as a flag, never as a value.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from prism_challenge.sandbox.record import MeasuredAxes

MAX_ARMS = 8
_VALUE = re.compile(r"^[a-z0-9][a-z0-9_.+-]{0,31}$")
AxisKind = Literal["int", "float", "logfloat", "categorical"]


class AxisSpec(BaseModel):
    """One axis. Numeric axes have bounds and bucket edges; categorical ones <= 8 values."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    kind: AxisKind
    low: float | None = None
    high: float | None = None
    edges: list[float] = []
    values: list[str] = []
    source: Literal["measured", "declared"] = "declared"
    description: str = Field("", max_length=300)
    # categorical value -> module class names whose presence in the census implies it
    census: dict[str, list[str]] = {}

    @model_validator(mode="after")
    def _bounded(self) -> AxisSpec:
        if self.kind == "categorical":
            if not 2 <= len(self.values) <= MAX_ARMS or len(set(self.values)) != len(self.values):
                raise ValueError(
                    f"axis {self.name}: categorical needs 2..{MAX_ARMS} distinct values"
                )
            if any(not _VALUE.match(v) for v in self.values):
                raise ValueError(f"axis {self.name}: values must match {_VALUE.pattern}")
            if self.edges or self.low is not None or self.high is not None:
                raise ValueError(f"axis {self.name}: categorical axes take no bounds or edges")
            return self
        if self.low is None or self.high is None or self.values:
            raise ValueError(f"axis {self.name}: numeric axes need low and high, no values")
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"axis {self.name}: need finite low < high")
        if self.kind == "logfloat" and self.low <= 0:
            raise ValueError(f"axis {self.name}: a log-float axis needs low > 0")
        if not 1 <= len(self.edges) <= MAX_ARMS - 1:
            raise ValueError(f"axis {self.name}: numeric axes need 1..{MAX_ARMS - 1} edges")
        inner = [self.low, *self.edges, self.high]
        if any(a >= b for a, b in zip(inner, inner[1:], strict=False)):
            raise ValueError(f"axis {self.name}: edges must increase strictly inside (low, high)")
        return self

    @property
    def arms(self) -> list[str]:
        if self.kind == "categorical":
            return list(self.values)
        e = self.edges
        return [f"<{e[0]:g}"] + [f"{a:g}-{b:g}" for a, b in zip(e, e[1:], strict=False)] + [
            f">={e[-1]:g}"
        ]

    def coerce(self, value: Any) -> float | str:
        """The raw value checked against type and bounds; ValueError says why not."""
        if self.kind == "categorical":
            if isinstance(value, bool):
                value = str(value).lower()
            if not isinstance(value, str) or value.strip().lower() not in self.values:
                raise ValueError(f"{self.name}: {value!r} is not one of {self.values}")
            return value.strip().lower()
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{self.name}: {_brief(value)} is not a number")
        # Compare before converting: an int past float range would raise OverflowError.
        if not (self.low <= value <= self.high) or not math.isfinite(value):
            raise ValueError(
                f"{self.name}: {_brief(value)} is outside [{self.low:g}, {self.high:g}]"
            )
        if self.kind == "int" and not float(value).is_integer():
            raise ValueError(f"{self.name}: {value!r} is not an integer")
        return float(value)

    def arm_of(self, raw: float | str) -> str:
        if self.kind == "categorical":
            return str(raw)
        index = sum(1 for edge in self.edges if raw >= edge)
        return self.arms[index]


def _brief(value: Any) -> str:
    """A miner's value for a message: long ones (a 400-digit integer) are cut and measured."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:24]}... ({len(text)} characters)"


class AxisReading(BaseModel):
    """One submission on the schema: arms, raw values, and flags about what was refused."""

    model_config = ConfigDict(extra="forbid")

    arms: dict[str, str] = {}
    raw: dict[str, float | str] = {}
    flags: list[str] = []


def _first_optimizer(m: MeasuredAxes):
    """The optimiser whose steps moved the model's parameters furthest (then: that could
    move the most elements; first seen if a record is older than both counts)."""
    return max(m.optimizers, key=lambda o: (o.update, o.moved)) if m.optimizers else None


# the harness's precision names (torch dtype names) -> the schema's arms
_PRECISION_ARM = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _measured_value(name: str, m: MeasuredAxes) -> Any:
    opt = _first_optimizer(m)
    if name == "params":
        return m.param_count
    if name == "layers":
        return m.layer_count
    if name == "optimizer":
        return opt.cls.lower() if opt else None
    if name == "lr":
        return opt.hparams.get("lr") if opt else None
    if name == "batch_size":
        return m.batch_size
    if name == "precision":
        return _PRECISION_ARM.get(m.precision.lower(), m.precision.lower())
    if name == "compile":
        return "true" if m.compile else "false"
    return None


def _same(spec: AxisSpec, a: float | str, b: float | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return math.isclose(a, b, rel_tol=1e-6)


def read_axes(
    schema: list[AxisSpec],
    measured: MeasuredAxes | dict | None,
    declared: dict | None,
) -> AxisReading:
    """Place a submission on the schema. Never raises on a miner's input: it flags it."""
    m = MeasuredAxes.model_validate(measured) if isinstance(measured, dict) else measured
    declared = dict(declared or {})
    known = {a.name for a in schema}
    reading = AxisReading()
    for name in sorted(set(declared) - known):
        hint = did_you_mean(name, known)
        reading.flags.append(f"unknown declared axis {name!r} ignored"
                             + (f"; {hint}" if hint else ""))
    for spec in schema:
        value: float | str | None = None
        if spec.source == "measured" and m is not None:
            got = _measured_value(spec.name, m)
            if got is not None:
                try:
                    value = spec.coerce(got)
                except ValueError:
                    value = "other" if "other" in spec.values else None
                    if value is None:
                        reading.flags.append(f"measured {spec.name}={got!r} is outside the schema")
        if spec.name in declared:
            try:
                said = spec.coerce(declared[spec.name])
            except ValueError as exc:
                reading.flags.append(f"declared {exc}")
            else:
                if value is not None and not _same(spec, said, value):
                    reading.flags.append(
                        f"contradiction: {spec.name} declared {said!r}, measured {value!r}"
                    )
                elif value is None and spec.source == "measured" and m is not None:
                    reading.flags.append(f"{spec.name} declared but not measured; ignored")
                elif value is None:
                    value = said
                    _check_census(spec, said, m, reading)
        if value is not None:
            reading.raw[spec.name] = value
            reading.arms[spec.name] = spec.arm_of(value)
    return reading


def _check_census(spec: AxisSpec, said: float | str, m: MeasuredAxes | None, r: AxisReading):
    hints = spec.census.get(str(said))
    if not hints or m is None:
        return
    if not any(m.module_census.get(cls, 0) > 0 for cls in hints):
        r.flags.append(f"contradiction: {spec.name} declared {said!r} but no {hints} in the model")


def validate_declared(schema: list[AxisSpec], declared: dict) -> list[str]:
    """Problems with a `prism.toml` [axes] table, for `prism check` (empty = valid)."""
    by_name = {a.name: a for a in schema}
    problems = []
    for name, value in sorted(declared.items()):
        spec = by_name.get(name)
        if spec is None:
            problems.append(unknown_axis(name, by_name))
            continue
        try:
            spec.coerce(value)
        except ValueError as exc:
            problems.append(str(exc))
    return problems


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """The hint for a misspelt axis name, `did you mean 'optimizer'?` (up to three close
    names); empty when no known name is close."""
    close = difflib.get_close_matches(name.lower(), sorted(known), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def unknown_axis(name: str, known: Iterable[str]) -> str:
    """A declared axis the schema does not know, with the closest names it does and the
    next step (for `prism check`, which shows it as a problem of prism.toml)."""
    names = sorted(known)
    hint = did_you_mean(name, names)
    return (f"unknown axis {name!r}; {hint + ' ' if hint else ''}rename or remove it in "
            f"prism.toml [axes] (known: {', '.join(names)})")


DEFAULT_AXES: list[AxisSpec] = [
    AxisSpec(name="params", kind="logfloat", low=1.0, high=1e10, edges=[1e6, 1e7, 1e8],
             source="measured", description="trainable parameters"),
    AxisSpec(name="layers", kind="int", low=0, high=4096, edges=[4, 8, 16, 32],
             source="measured", description="counted transformer/residual blocks"),
    AxisSpec(name="optimizer", kind="categorical", source="measured",
             values=["adamw", "adam", "sgd", "muon", "lion", "adafactor", "other"],
             description="class of the optimiser that moved most of the model's parameters"),
    AxisSpec(name="lr", kind="logfloat", low=1e-7, high=10.0, edges=[1e-4, 1e-3, 1e-2],
             source="measured", description="peak learning rate of that optimiser"),
    AxisSpec(name="batch_size", kind="int", low=1, high=1 << 20, edges=[8, 32, 128],
             source="measured", description="rows per scored step (row-weighted median)"),
    AxisSpec(name="precision", kind="categorical", values=["fp32", "bf16", "fp16", "other"],
             source="measured", description="autocast dtype of most scored forwards"),
    AxisSpec(name="compile", kind="categorical", values=["false", "true"], source="measured",
             description="torch.compile produced most scored forwards"),
    AxisSpec(name="norm", kind="categorical", values=["layernorm", "rmsnorm", "none", "other"],
             census={"layernorm": ["LayerNorm"], "rmsnorm": ["RMSNorm"]},
             description="normalisation layer (declared)"),
    AxisSpec(name="position", kind="categorical",
             values=["learned", "rope", "alibi", "none", "other"],
             description="position encoding (declared)"),
]
