"""Matched contrasts: hand-computed gains, partners from other hotkeys, each run used once."""

import pytest

from prism_challenge.registry.evidence import match, outcome, queue_key
from prism_challenge.registry.hypotheses import Interaction, SingleFactor

SPEC = SingleFactor(axis="optimizer", treatment="muon", control="adamw")
GRID = Interaction(axis_a="optimizer", a1="muon", a0="adamw", axis_b="lr", b1="hi", b0="lo")


def test_pair_gain_is_control_minus_treatment():
    queues = {queue_key("H1", "C", "s"): [["alice", 2.10, 101], ["bob", 2.00, 102]]}
    c = match("H1", SPEC, "T", "s", "carol", 2.04, queues)
    assert c.gain == pytest.approx(2.10 - 2.04)  # the OLDEST waiting control is taken
    assert c.partners == {"C": 0}
    # a control run is judged against a waiting treatment run, same sign convention
    queues = {queue_key("H1", "T", "s"): [["alice", 2.00, 103]]}
    assert match("H1", SPEC, "C", "s", "bob", 2.05, queues).gain == pytest.approx(0.05)


def test_own_hotkey_is_never_a_partner():
    queues = {queue_key("H1", "C", "s"): [["alice", 2.10, 104], ["bob", 2.20, 105]]}
    assert match("H1", SPEC, "T", "s", "alice", 2.0, queues).partners == {"C": 1}
    only_own = {queue_key("H1", "C", "s"): [["alice", 2.10, 106]]}
    assert match("H1", SPEC, "T", "s", "alice", 2.0, only_own).gain is None


def test_other_strata_are_not_partners():
    queues = {queue_key("H1", "C", "params=big"): [["alice", 2.10, 107]]}
    assert match("H1", SPEC, "T", "params=small", "bob", 2.0, queues).gain is None


def test_interaction_gain_is_minus_the_interaction_contrast():
    y = {"11": 1.80, "10": 2.00, "01": 2.05, "00": 2.10}  # I = 1.8 - 2.0 - 2.05 + 2.1 = -0.15
    for cell in y:
        queues = {queue_key("H1", c, "s"): [[f"k{c}", v, 108]] for c, v in y.items() if c != cell}
        got = match("H1", GRID, cell, "s", "me", y[cell], queues)
        assert got.gain == pytest.approx(0.15), cell


def test_interaction_partners_must_be_distinct_hotkeys():
    queues = {queue_key("H1", c, "s"): [["same", 2.0, 109]] for c in ("10", "01", "00")}
    assert match("H1", GRID, "11", "s", "me", 1.9, queues).gain is None


def test_outcome_with_tie_margin():
    assert outcome(0.01, 0.002) == "win"
    assert outcome(-0.01, 0.002) == "loss"
    assert outcome(0.001, 0.002) == "tie"
