"""Paths shared by the validator tests."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "sandbox" / "tiny"
