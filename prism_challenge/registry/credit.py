"""Research credit: what a hotkey earns for evidence the brief asked for.

A run earns `FILL_POINTS` when it is used as matched evidence on a claim the brief lists
(active, not archived) at the time of the contrast: the run that completed the contrast and
every partner observed after the claim entered the ledger (a partner scored before the claim
existed was not asked for). A tie earns as much as a win or a loss: the brief asked for the
run either way, and a near miss is evidence too. The run whose contrast decides a claim
earns `DECIDE_POINTS` more.

Two limits make farming pointless, and both are pure functions of the ledger:

- **One paid run per design.** A run's design is its arm on every axis. Once a run of a
  hotkey has been paid in the window, another run of the same hotkey with the same design
  (a near-duplicate: the same bundle resubmitted, a renamed variable, another seed) earns
  nothing, whichever claim it serves. Two different designs are two experiments.
- **A cap per hotkey per window.** At most `credit_cap` points within the last
  `credit_window` observations; a grant beyond it is cut to what is left.

A credit entry is [observation index, hotkey, points, design, run index].
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

from prism_challenge.registry.state import HypState, RegistryState

FILL_POINTS = 1.0
DECIDE_POINTS = 3.0


def design_of(arms: dict[str, str]) -> str:
    """A run's design: a digest of its arms on every axis."""
    text = ",".join(f"{k}={v}" for k, v in sorted(arms.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def credit_contrast(state: RegistryState, h: HypState, runs: list, cfg) -> None:
    """Credit the runs (queue entries [hotkey, bpb, run index, submission id, design]) of
    one contrast of `h`, the new run first. Call only while `h` is active, before the
    contrast updates its status."""
    for entry in runs:
        if entry[2] > h.created_at:
            _grant(state, entry, FILL_POINTS, cfg)


def credit_decision(state: RegistryState, run: list, cfg) -> None:
    _grant(state, run, DECIDE_POINTS, cfg)


def _grant(state: RegistryState, entry: list, points: float, cfg) -> None:
    hotkey, run = entry[0], entry[2]
    design = entry[4] if len(entry) > 4 else f"run:{run}"  # entries of older snapshots
    held = 0.0
    for c in state.credits:
        if c[1] != hotkey:
            continue
        if len(c) > 4 and c[3] == design and c[4] != run:
            return  # a near-duplicate of a run of this hotkey that was already paid
        held += c[2]
    room = cfg.credit_cap - held
    if room > 1e-12:
        state.credits.append([state.n_obs, hotkey, min(points, room), design, run])


def prune(state: RegistryState, cfg) -> None:
    """Forget grants older than the window."""
    floor = state.n_obs - cfg.credit_window
    state.credits = [c for c in state.credits if c[0] > floor]


def research_credits(state: RegistryState) -> dict[str, float]:
    """Hotkey -> share of the research pot over the window (sums to 1; {} when nobody
    earned any)."""
    points = _points(state)
    total = sum(points.values())
    return {k: v / total for k, v in sorted(points.items())} if total else {}


def credit_table(state: RegistryState, cfg) -> list[dict]:
    """Per hotkey: points in the window, share of the pot, runs paid, and whether the cap
    binds; highest points first."""
    points = _points(state)
    runs: dict[str, set] = defaultdict(set)
    for entry in state.credits:
        runs[entry[1]].add(entry[4] if len(entry) > 4 else entry[0])
    total = sum(points.values())
    rows = [
        {"hotkey": hk, "points": round(p, 6), "share": round(p / total, 6) if total else 0.0,
         "runs": len(runs[hk]), "capped": p >= cfg.credit_cap - 1e-9}
        for hk, p in points.items()
    ]
    return sorted(rows, key=lambda r: (-r["points"], r["hotkey"]))


def _points(state: RegistryState) -> dict[str, float]:
    points: dict[str, float] = defaultdict(float)
    for entry in state.credits:
        points[entry[1]] += entry[2]
    return dict(points)
