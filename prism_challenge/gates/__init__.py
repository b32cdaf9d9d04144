"""Pre-GPU gates (docs/gates.md): AST policy, duplicate detection, LLM review.

The validator calls `GateStage(settings, store, reviewer).process_due(now)`; miners' local
pre-flight (`prism check`) calls `check_policy(files)`.
"""

from prism_challenge.gates.fingerprint import Fingerprint, fingerprint
from prism_challenge.gates.policy import check_policy
from prism_challenge.gates.prompt import GATE_POLICY_VERSION
from prism_challenge.gates.reviewer import LlmConfigError, LlmReviewer, ReviewUnavailable
from prism_challenge.gates.rules import POLICY_VERSION
from prism_challenge.gates.stage import REVIEWED_LLM, REVIEWED_NONE, GateOutcome, GateStage
from prism_challenge.gates.verdict import Finding, Verdict
from prism_challenge.gates.violation import Violation

__all__ = [
    "GATE_POLICY_VERSION",
    "POLICY_VERSION",
    "REVIEWED_LLM",
    "REVIEWED_NONE",
    "Finding",
    "Fingerprint",
    "GateOutcome",
    "GateStage",
    "LlmConfigError",
    "LlmReviewer",
    "ReviewUnavailable",
    "Verdict",
    "Violation",
    "check_policy",
    "fingerprint",
]
