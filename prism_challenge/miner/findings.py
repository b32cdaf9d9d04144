"""What `prism check` and `prism eval` found about a bundle, one line per check.

The static findings (policy, contract, declared axes) are shared by both commands: they
are exactly what the validator's first gate decides, so a bundle that fails them is never
run, locally or there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from prism_challenge.bundle import Bundle
from prism_challenge.gates import check_policy
from prism_challenge.gates.axis_claims import axis_contradictions
from prism_challenge.registry import DEFAULT_AXES, validate_declared

Status = Literal["pass", "fail", "skip", "info", "warn"]  # warn: shown, never refuses


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str = ""


def static_findings(bundle: Bundle) -> list[Finding]:
    """Contract + AST policy (the validator's own `check_policy`) and the declared axes,
    including a declared axis the code contradicts (a warning, as on the validator's page)."""
    out = []
    violations = check_policy(bundle.files)
    if violations:
        out += [Finding("policy", "fail", str(v)) for v in violations]
    else:
        out.append(Finding("policy", "pass", "contract and AST policy: no violations"))
    declared = dict(bundle.meta.axes)
    problems = validate_declared(DEFAULT_AXES, declared)  # a misspelt name: "did you mean"
    if problems:
        out += [Finding("axes", "fail", f"prism.toml [axes]: {p}") for p in problems]
    elif declared:
        pairs = ", ".join(f"{k}={v}" for k, v in sorted(declared.items()))
        out.append(Finding("axes", "pass", f"declared axes validate: {pairs}"))
    else:
        out.append(Finding("axes", "info", "no axes declared in prism.toml (optional)"))
    out += [Finding("axes", "warn", line)
            for line in axis_contradictions(bundle.files, declared)]
    return out


def state_findings(record) -> list[Finding]:
    """The state contract as the run saw it (`MeasuredAxes.state_outside`); nothing when
    fewer than two scored steps ran (nothing to compare)."""
    from prism_challenge.sandbox.harness.state_contract import ADVICE

    notes = list(record.axes.state_outside) if record.axes is not None else []
    if not notes:
        return [] if record.summary.count < 2 else [Finding(
            "state", "pass", "no state seen outside parameters and buffers")]
    return [Finding("state", "fail", f"{note}; {ADVICE}") for note in notes]


def failed(findings: list[Finding]) -> bool:
    return any(f.status == "fail" for f in findings)
