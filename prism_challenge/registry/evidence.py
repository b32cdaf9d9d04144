"""Matched contrasts: turning scored submissions into wins and losses *for one claim*.

A hypothesis compares cells of the axis space (T vs C; or the four cells of a 2x2 grid).
A new submission waits in its cell's queue (per stratum: the configured match axes, e.g. the
parameter-count bucket) until partners exist in the other cells of the same stratum, from
*other* hotkeys (all distinct). Then the oldest waiting partners are taken (FIFO) and

    pair:    gain = bpb(C) - bpb(T)                       (> 0 supports "T beats C")
    grid:    gain = -(bpb11 - bpb10 - bpb01 + bpb00)      (> 0 supports "synergy")

is one win (gain > tie), loss (gain < -tie) or tie. A queue entry is
[hotkey, bpb, run, submission id, design] (older snapshots: the first three).
Every run is evidence for at most ONE claim (see `ledger._observation`), so the contrasts
are independent and the Beta-Binomial counts honest: under no effect a win has probability
exactly 1/2. (If a run could serve several claims, its luck in one claim would steer the
brief, hence which strata miners complete in another, and it would then be picked as a
partner there *because* it was lucky: the simulator showed that overdispersion.)
A rolling median reference would share one noisy reference across many contrasts and let
one lucky draw count ten times; comparing a run with its own hotkey's baseline (the
predecessor's flaw) measured the miner, not the claim.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism_challenge.registry.hypotheses import CLAIM_SIGN, axes_of, predictors


@dataclass(frozen=True)
class Contrast:
    cell: str
    stratum: str
    gain: float | None  # None: no complete set of partners yet (the submission waits)
    partners: dict[str, int]  # cell -> index of the partner taken from that cell's queue
    runs: tuple[int, ...] = ()  # the partners' run numbers (observation index)
    members: tuple[tuple[str, tuple], ...] = ()  # (cell, queue entry) of every partner


def stratum_of(spec, arms: dict[str, str], match_axes: list[str]) -> str:
    """The matching key: the arms of the match axes the claim is not itself about
    (`"*"` = all of them), e.g. "norm=rmsnorm,params=1e+06-1e+07"; "" when none."""
    own = set(axes_of(spec))
    names = sorted(arms) if "*" in match_axes else match_axes
    return ",".join(f"{a}={arms.get(a, '?')}" for a in names if a not in own)


def parse_stratum(stratum: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in stratum.split(",") if part)


def queue_key(hid: str, cell: str, stratum: str) -> str:
    return f"{hid}|{cell}|{stratum}"


def match(
    hid: str, spec, cell: str, stratum: str, hotkey: str, bpb: float, queues: dict[str, list]
) -> Contrast:
    """Find the oldest partners from distinct other hotkeys; does not modify the queues."""
    used = {hotkey}
    pred = 0.0
    partners: dict[str, int] = {}
    runs, members = [], []
    for other, sign in predictors(spec)[cell]:
        queue = queues.get(queue_key(hid, other, stratum), [])
        pick = next((i for i, entry in enumerate(queue) if entry[0] not in used), None)
        if pick is None:
            return Contrast(cell, stratum, None, {})
        used.add(queue[pick][0])
        partners[other] = pick
        runs.append(queue[pick][2])
        members.append((other, tuple(queue[pick])))
        pred += sign * queue[pick][1]
    gain = CLAIM_SIGN[cell] * (pred - bpb)
    return Contrast(cell, stratum, gain, partners, tuple(runs), tuple(members))


def outcome(gain: float, tie: float) -> str:
    if gain > tie:
        return "win"
    if gain < -tie:
        return "loss"
    return "tie"
