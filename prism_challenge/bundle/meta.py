"""`prism.toml`: a bundle's optional name, description and declared design axes.

Only the shape is checked here (types, lengths, scalar axis values); whether an axis exists
and its value is in range is the research registry's axis schema's call (docs/registry.md).
Unknown top-level keys are refused so that a typo ("axis" for "axes") fails loudly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from prism_challenge.bundle.errors import BundleError
from prism_challenge.bundle.rules import MANIFEST

MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 4000
MAX_AXES = 64
# TOML integers are 64-bit; tomllib accepts longer ones, which no axis can mean.
_INT64 = range(-(2**63), 2**63)
AxisValue = str | int | float | bool


@dataclass(frozen=True)
class BundleMeta:
    name: str | None = None
    description: str | None = None
    axes: Mapping[str, AxisValue] = field(default_factory=lambda: MappingProxyType({}))


def _refuse(message: str) -> BundleError:
    return BundleError("BUNDLE_META", f"{MANIFEST}: {message}", file=MANIFEST)


def _text(doc: dict, key: str, limit: int) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _refuse(f"'{key}' must be a non-empty string")
    if len(value) > limit:
        raise _refuse(f"'{key}' is {len(value)} characters; at most {limit} are allowed")
    return value


def _axes(doc: dict) -> Mapping[str, AxisValue]:
    axes = doc.get("axes", {})
    if not isinstance(axes, dict):
        raise _refuse("'axes' must be a table, e.g. [axes] followed by key = value lines")
    if len(axes) > MAX_AXES:
        raise _refuse(f"{len(axes)} axes declared; at most {MAX_AXES} are allowed")
    for key, value in axes.items():
        if not isinstance(value, AxisValue):
            raise _refuse(f"axis '{key}' must be a string, number or boolean")
        if isinstance(value, float) and not math.isfinite(value):
            raise _refuse(f"axis '{key}' must be a finite number")
        if isinstance(value, int) and value not in _INT64:
            raise _refuse(f"axis '{key}' is not a 64-bit integer")
    return MappingProxyType(dict(axes))


def parse_meta(doc: dict) -> BundleMeta:
    """Build the meta from a parsed `prism.toml` document."""
    unknown = sorted(set(doc) - {"name", "description", "axes"})
    if unknown:
        raise _refuse(
            f"unknown key '{unknown[0]}'; the allowed keys are name, description and [axes]"
        )
    return BundleMeta(
        name=_text(doc, "name", MAX_NAME_CHARS),
        description=_text(doc, "description", MAX_DESCRIPTION_CHARS),
        axes=_axes(doc),
    )
