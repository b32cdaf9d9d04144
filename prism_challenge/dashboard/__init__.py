"""The validator's web dashboard: leaderboard, queue, learning curves, weights, registry.

Server-rendered HTML with inline SVG charts; see docs/dashboard.md.
"""

from prism_challenge.dashboard.curve import Curve, CurvePoint, learning_curve
from prism_challenge.dashboard.routes import build
from prism_challenge.dashboard.svg import HLine, Series, line_chart

__all__ = ["Curve", "CurvePoint", "HLine", "Series", "build", "learning_curve", "line_chart"]
