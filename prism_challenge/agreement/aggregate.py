"""The shared-input ranking rule: one run's measurements -> the values it is ranked on.

Pure and stateless: the result depends only on the set of measurements held, the stakes and
the clock, so two validators holding the same measurements rank every run the same way, and
a split heals as soon as they do (no decision is remembered between epochs).

- A measurement counts once it has *settled*: `settle_s` after it was made. Peers' pages
  reach a validator within a poll or two; a settle window longer than that means every
  validator counts the same measurements at the same moment, so a leader change is not
  decided at different times by different validators.
- A run is rankable only when the counted measurements come from validators holding more
  than `quorum` of the *permitted* stake: every validator the metagraph permits, reachable
  or not (`permitted`). A quorum counted over what happens to be reachable would let a
  validator that reaches only a few peers, or peers that answer some validators and not
  others, rank on a minority. With a quorum of 2/3, a coalition holding less than 1/3 of
  the stake can never make a run rankable on its own numbers, nor hold the median (below).
- bpb and held-out delta are stake-weighted medians (the lower one on an exact split).
  As long as honest validators hold more than half of the counted stake, the median lies
  between two honest measurements, whatever the others report.
- Stream parts (the run's bpb over equal stretches of the stream, which the dethrone rule
  pairs between two runs to size its noise term) are the stake-weighted median stretch by
  stretch, over the measurements that carry the same number of stretches as those holding
  most of the counted stake (None when those hold no more than half of it). Every validator
  holding the same measurements thus dethrones with the same noise, whether or not it
  scored either run itself.
- Eligible: validators holding more than half of the counted stake say so. Verified (may
  lead): validators holding more than `quorum` of the permitted stake passed its replay
  (each pass counts once settled too).
- The entry keeps its own `scored_at` (when this validator scored it; 0 for a run only peers
  measured): peers' `measured_at` never makes a run the "most recent score", which would let
  one peer publishing an old key's run late choose the key weights are set on. The newest
  counted `measured_at` is shown apart (`Entry.measured_at`), for readers of the standings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prism_challenge.scoring.leaderboard import Entry


@dataclass(frozen=True)
class Measurement:
    """One validator's measurement of one run (its own, or a peer's as fetched)."""

    validator: str  # the measuring validator's hotkey
    bpb: float
    heldout_delta: float
    eligible: bool
    measured_at: float  # when the measuring validator scored it (its clock, seconds)
    verified_at: float | None = None  # when its replay passed there; None: not (yet)
    stream_parts: tuple[float, ...] | None = None  # bpb over equal stretches of the stream


def weighted_median(pairs: Iterable[tuple[float, float]]) -> float:
    """The smallest value whose cumulative weight reaches half the total (the lower median).

    Raises ValueError on an empty input or a non-positive total weight."""
    ordered = sorted((v, w) for v, w in pairs if w > 0)
    total = sum(w for _, w in ordered)
    if not ordered or total <= 0:
        raise ValueError("a weighted median needs at least one positive weight")
    seen = 0.0
    for value, weight in ordered:
        seen += weight
        if seen >= total / 2:
            return value
    return ordered[-1][0]


def median_parts(held: list[Measurement], stakes: Mapping[str, float]
                 ) -> list[float] | None:
    """Stretch-by-stretch weighted median of the stream parts of `held`: over the
    measurements whose number of stretches holds the most stake, if that is more than half
    of the stake of `held`; else None."""
    by_len: dict[int, list[Measurement]] = {}
    for m in held:
        if m.stream_parts:
            by_len.setdefault(len(m.stream_parts), []).append(m)
    if not by_len:
        return None
    group = max(by_len.values(), key=lambda g: (sum(stakes[m.validator] for m in g),
                                                 len(g[0].stream_parts or ())))
    if sum(stakes[m.validator] for m in group) <= sum(stakes[m.validator] for m in held) / 2:
        return None
    width = len(group[0].stream_parts or ())
    return [weighted_median((m.stream_parts[i], stakes[m.validator]) for m in group)
            for i in range(width)]


def counted(measurements: Iterable[Measurement], stakes: Mapping[str, float], *,
            now: float, settle_s: float) -> list[Measurement]:
    """The settled measurements of electorate members (one per validator: the latest)."""
    latest: dict[str, Measurement] = {}
    for m in measurements:
        if stakes.get(m.validator, 0.0) <= 0 or m.measured_at + settle_s > now:
            continue
        if m.validator not in latest or m.measured_at > latest[m.validator].measured_at:
            latest[m.validator] = m
    return [latest[v] for v in sorted(latest)]


def aggregate(entry: Entry, measurements: Iterable[Measurement], stakes: Mapping[str, float],
              *, quorum: float, now: float, settle_s: float = 0.0,
              permitted: float | None = None) -> Entry | None:
    """`entry` with bpb, delta, eligibility and verification replaced by the aggregate of
    `measurements` (its `scored_at` kept), or None while the counted stake is not above
    `quorum` of `permitted` (the stake of every permitted validator; default: the total of
    `stakes`, never less)."""
    total = max(sum(s for s in stakes.values() if s > 0), permitted or 0.0)
    held = counted(measurements, stakes, now=now, settle_s=settle_s)
    held_stake = sum(stakes[m.validator] for m in held)
    if total <= 0 or held_stake <= quorum * total:
        return None
    eligible_stake = sum(stakes[m.validator] for m in held if m.eligible)
    verified_stake = sum(stakes[m.validator] for m in held
                         if m.verified_at is not None and m.verified_at + settle_s <= now)
    return entry.model_copy(update={
        "measured_at": max(m.measured_at for m in held),
        "bpb": weighted_median((m.bpb, stakes[m.validator]) for m in held),
        "heldout_delta": weighted_median((m.heldout_delta, stakes[m.validator]) for m in held),
        "stream_parts": median_parts(held, stakes),
        "eligible": eligible_stake > held_stake / 2,
        "censored": False,  # a run stopped early is served as not eligible: counted above
        "verification": "passed" if verified_stake > quorum * total else (
            entry.verification if entry.verification != "passed" else "queued"),
    })
