"""The attack corpus: every bundle is refused with the rule its expected.txt names."""

from __future__ import annotations

from pathlib import Path

import pytest

from prism_challenge.gates import check_policy

ATTACKS = Path(__file__).resolve().parents[1] / "fixtures" / "attacks"
# Copies (B7) pass the policy and are the duplicate gate's business (test_duplicates.py).
NAMES = sorted(
    p.name for p in ATTACKS.iterdir()
    if p.is_dir() and not (p / "expected.txt").read_text().startswith("DUPLICATE-OF")
)
# Static-visible classes of docs/security.md A and B (A5, B3, B5 need a run; B6 and B7 have
# static parts: a stall, reading the harness's state), each of which needs attacks here.
CLASSES = ["a1", "a2", "a3", "a4", "a6", "b1", "b2", "b4", "b6", "b7", "b8"]


def expected(name: str) -> list[tuple[str, str, str]]:
    lines = (ATTACKS / name / "expected.txt").read_text().split("\n")
    return [tuple(line.split()) for line in lines if line.strip()]


def test_every_static_visible_class_has_attacks():
    for prefix in CLASSES:
        assert any(n.startswith(prefix + "_") for n in NAMES), prefix
    assert len(NAMES) >= 50


@pytest.mark.parametrize("name", NAMES)
def test_attack_is_rejected_with_the_expected_rule(name):
    files = {p.name: p.read_bytes() for p in (ATTACKS / name).iterdir() if p.suffix == ".py"}
    found = check_policy(files)
    assert found, f"{name} passed the policy"
    want = expected(name)
    for rule, file, line in want:
        hits = [v for v in found if v.rule == rule and v.file == file
                and (line == "*" or v.line == int(line))]
        assert hits, f"{name}: expected {rule} at {file}:{line}, got {[str(v) for v in found]}"
        assert all(v.message and len(v.message) > 20 for v in hits)
    assert {v.rule for v in found} <= {w[0] for w in want}, [str(v) for v in found]
