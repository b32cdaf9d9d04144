"""Pre-GPU gates (DESIGN §1, issue 5): AST policy, duplicate detection, LLM review."""

from prism_challenge.gates.policy import check_policy
from prism_challenge.gates.rules import POLICY_VERSION
from prism_challenge.gates.violation import Violation

__all__ = ["POLICY_VERSION", "Violation", "check_policy"]
