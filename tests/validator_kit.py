"""Paths and a polling helper shared by the validator tests."""

import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "fixtures" / "sandbox" / "tiny"


def wait_for(predicate, timeout_s: float, what: str):
    """Poll `predicate` until it returns something truthy (returned), or fail naming `what`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
