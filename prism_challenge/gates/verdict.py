"""The LLM reviewer's structured verdict, validated before it can decide anything.

Anything that does not validate is malformed and holds the submission; there is no
default verdict. The JSON schema sent to the endpoint is derived from these models and is
strict (every field required, no extra keys) so structured-output endpoints enforce it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: str = Field(pattern=r"^LLM-[A-Z-]{2,40}$")
    file: str = Field(max_length=64)
    line: int = Field(ge=0, le=100_000)
    message: str = Field(min_length=1, max_length=1000)


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["allow", "reject"]
    reasons: list[str] = Field(max_length=20)
    findings: list[Finding] = Field(max_length=50)

    @model_validator(mode="after")
    def _reject_says_why(self) -> Verdict:
        if self.decision == "reject" and not (self.reasons or self.findings):
            raise ValueError("a rejection must give at least one reason or finding")
        return self

    def summary(self, limit: int = 10) -> str:
        lines = [r[:300] for r in self.reasons[:limit]]
        lines += [f"{f.rule} {f.file}:{f.line}: {f.message[:300]}" for f in self.findings[:limit]]
        return "\n".join(lines)


def json_schema() -> dict:
    """The strict schema for `response_format={"type": "json_schema", ...}`."""
    finding = {
        "type": "object",
        "additionalProperties": False,
        "required": ["rule", "file", "line", "message"],
        "properties": {
            "rule": {"type": "string", "description": "one of the LLM-* rule ids"},
            "file": {"type": "string"},
            "line": {"type": "integer"},
            "message": {"type": "string"},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["decision", "reasons", "findings"],
        "properties": {
            "decision": {"type": "string", "enum": ["allow", "reject"]},
            "reasons": {"type": "array", "items": {"type": "string"}},
            "findings": {"type": "array", "items": finding},
        },
    }
