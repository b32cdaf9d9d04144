"""Research credit: what a hotkey earns for evidence the brief asked for.

A run earns `FILL_POINTS` when it is used as matched evidence on a claim the brief lists
(active, not archived) at the time of the contrast: the run that completed the contrast and
every partner observed after the claim entered the ledger (a partner scored before the claim
existed was not asked for). A tie earns as much as a win or a loss: the brief asked for the
run either way, and a near miss is evidence too. The run whose contrast decides a claim
earns `DECIDE_POINTS` more.

Two limits make farming pointless, and both are pure functions of the ledger:

- **One credit per evidence slot.** A slot is (claim, cell, stratum): where the run sits in
  the contrast. A near-duplicate of a credited run (same design, another seed or a renamed
  variable) lands in the same slot and earns nothing while the first is in the window.
- **A cap per hotkey per window.** At most `credit_cap` points within the last
  `credit_window` observations; a grant beyond it is cut to what is left.
"""

from __future__ import annotations

from collections import defaultdict

from prism_challenge.registry.state import HypState, RegistryState

FILL_POINTS = 1.0
DECIDE_POINTS = 3.0


def credit_contrast(
    state: RegistryState, h: HypState, stratum: str, runs: list[tuple[str, str, int]], cfg
) -> None:
    """Credit the runs of one contrast of `h`: (cell, hotkey, run index) each, the new run
    included. Call only while `h` is active (before the contrast updates its status)."""
    for cell, hotkey, run in runs:
        if run > h.created_at:
            _grant(state, hotkey, FILL_POINTS, f"{h.id}|{cell}|{stratum}", cfg)


def credit_decision(state: RegistryState, h: HypState, hotkey: str, cfg) -> None:
    _grant(state, hotkey, DECIDE_POINTS, f"{h.id}|decided", cfg)


def _grant(state: RegistryState, hotkey: str, points: float, slot: str, cfg) -> None:
    held = 0.0
    for entry in state.credits:
        if entry[1] != hotkey:
            continue
        if len(entry) > 3 and entry[3] == slot:
            return  # this hotkey already earned this slot in the window
        held += entry[2]
    room = cfg.credit_cap - held
    if room > 1e-12:
        state.credits.append([state.n_obs, hotkey, min(points, room), slot])


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
    """Per hotkey: points in the window, share of the pot, credited slots, and whether the
    cap binds; highest points first."""
    points = _points(state)
    slots: dict[str, int] = defaultdict(int)
    for entry in state.credits:
        slots[entry[1]] += 1
    total = sum(points.values())
    rows = [
        {"hotkey": hk, "points": round(p, 6), "share": round(p / total, 6) if total else 0.0,
         "grants": slots[hk], "capped": p >= cfg.credit_cap - 1e-9}
        for hk, p in points.items()
    ]
    return sorted(rows, key=lambda r: (-r["points"], r["hotkey"]))


def _points(state: RegistryState) -> dict[str, float]:
    points: dict[str, float] = defaultdict(float)
    for entry in state.credits:
        points[entry[1]] += entry[2]
    return dict(points)
