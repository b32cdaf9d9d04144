"""Submission bundles: the file set, its limits, prism.toml and the canonical digest."""

from prism_challenge.bundle.bundle import Bundle
from prism_challenge.bundle.errors import BundleError
from prism_challenge.bundle.meta import BundleMeta
from prism_challenge.bundle.rules import (
    ALLOWED,
    ARCHITECTURE,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    MAX_SCRIPT_BYTES,
    MAX_WIRE_BYTES,
    TRAINING,
)

__all__ = [
    "ALLOWED",
    "ARCHITECTURE",
    "MANIFEST",
    "MAX_MANIFEST_BYTES",
    "MAX_SCRIPT_BYTES",
    "MAX_WIRE_BYTES",
    "TRAINING",
    "Bundle",
    "BundleError",
    "BundleMeta",
]
