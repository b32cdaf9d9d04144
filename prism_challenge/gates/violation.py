"""A policy violation: what a miner reads when a gate refuses a bundle.

Every refusal carries a stable rule id (documented in docs/gates.md), the file and line it
points at, and one sentence that says what to change, so a miner can fix it without
guessing and an operator can grep for a rule across submissions.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Violation:
    rule: str  # e.g. "AST-IMPORT"
    file: str  # "architecture.py" or "training.py"
    line: int  # 1-based; 0 when the whole file is meant
    message: str  # one sentence a miner can act on

    def sort_key(self) -> tuple[str, int, str, str]:
        return (self.file, self.line, self.rule, self.message)

    def __str__(self) -> str:
        return f"{self.rule} {self.file}:{self.line}: {self.message}"


def summarise(violations: list[Violation], limit: int = 20) -> str:
    """One line per violation, capped so that a hostile bundle cannot flood the store."""
    lines = [str(v) for v in violations[:limit]]
    if len(violations) > limit:
        lines.append(f"... and {len(violations) - limit} more")
    return "\n".join(lines)
