"""The research registry ("Bad PI", DESIGN §9): hypotheses over axes, judged by matched
contrasts, steering miners through program.md."""

from prism_challenge.registry.axes import (
    DEFAULT_AXES,
    AxisReading,
    AxisSpec,
    read_axes,
    validate_declared,
)
from prism_challenge.registry.directives import render_program
from prism_challenge.registry.ledger import LedgerError
from prism_challenge.registry.observation import Observation
from prism_challenge.registry.panel import posteriors_panel
from prism_challenge.registry.proposals import make_client, propose_axes, propose_hypotheses
from prism_challenge.registry.service import Registry, replay, research_credits

__all__ = [
    "DEFAULT_AXES",
    "AxisReading",
    "AxisSpec",
    "LedgerError",
    "Observation",
    "Registry",
    "make_client",
    "posteriors_panel",
    "propose_axes",
    "propose_hypotheses",
    "read_axes",
    "render_program",
    "replay",
    "research_credits",
    "validate_declared",
]
