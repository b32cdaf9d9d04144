"""The research registry ("Bad PI", docs/registry.md): hypotheses over axes, judged by matched
contrasts, steering miners through program.md."""

from prism_challenge.registry.axes import (
    DEFAULT_AXES,
    AxisReading,
    AxisSpec,
    read_axes,
    validate_declared,
)
from prism_challenge.registry.credit import credit_table, research_credits
from prism_challenge.registry.cycle import run_cycle
from prism_challenge.registry.directives import render_program
from prism_challenge.registry.ledger import LedgerError
from prism_challenge.registry.loop import ResearchLoop
from prism_challenge.registry.observation import Observation
from prism_challenge.registry.panel import posteriors_panel
from prism_challenge.registry.populations import assign, assignment_for
from prism_challenge.registry.proposals import make_client
from prism_challenge.registry.service import Registry, replay

__all__ = [
    "DEFAULT_AXES",
    "AxisReading",
    "AxisSpec",
    "LedgerError",
    "Observation",
    "Registry",
    "ResearchLoop",
    "assign",
    "assignment_for",
    "credit_table",
    "make_client",
    "posteriors_panel",
    "read_axes",
    "render_program",
    "replay",
    "research_credits",
    "run_cycle",
    "validate_declared",
]
