"""The memorisation / tamper gap penalty: a linear slide from the measured bpb to zero.

With s = gap_penalty_start and z = gap_zero, the penalty fraction is
    f = clamp((gap - s) / (z - s), 0, 1)
and the penalised score moves that fraction of the way from the measured bpb to the
know-nothing bpb (every budget token at log2 V bits):
    bpb' = bpb + f * max(0, uniform_bpb - bpb).
At gap <= s nothing changes; at gap >= z the run scores what learning nothing scores, and
the gate in `score.py` makes it ineligible. The slide is continuous, so a miner gains
nothing by landing just under a threshold.
"""

from __future__ import annotations


def penalty_fraction(gap: float | None, start: float, zero: float) -> float:
    """f in [0, 1]; 0 when the gap is unknown (the missing-eval gate handles that case)."""
    if gap is None or gap <= start:
        return 0.0
    if gap >= zero:
        return 1.0
    return (gap - start) / (zero - start)


def penalised_bpb(bpb: float, uniform_bpb: float, fraction: float) -> float:
    """The measured bpb moved `fraction` of the way towards the know-nothing bpb."""
    return bpb + fraction * max(0.0, uniform_bpb - bpb)
