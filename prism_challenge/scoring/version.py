"""The version of the scoring rules, and the weights version key derived from it.

Bump SCORING_VERSION whenever a change can move a score, a rank or a weight (measures,
gates, epsilon and dethrone rules, payout split). Validators send it as the `version_key`
of their weights, so a validator still running older rules is visible on chain, and a
subnet owner can require the current one (WeightsVersionKey).
"""

from __future__ import annotations

SCORING_VERSION = "1.3.0"


def version_key(version: str = SCORING_VERSION) -> int:
    """major.minor.patch -> major*1_000_000 + minor*1_000 + patch (each part below 1000)."""
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() and int(p) < 1000 for p in parts):
        raise ValueError(f"a scoring version is major.minor.patch below 1000, not {version!r}")
    major, minor, patch = (int(p) for p in parts)
    return major * 1_000_000 + minor * 1_000 + patch
