"""The weight vector the chain will store, from a plan and the subnet's weight rules.

bittensor's `SetWeights` conforms what it is given before signing: it clips the weights so
no share exceeds the subnet's `max_weight_limit` (mass goes to the others), quantizes them
to u16 (largest = 65535) and refuses fewer non-zero weights than `min_allowed_weights`.
A 90/10 plan on a subnet capped at 32768 is therefore stored as about 50/50. `as_sent`
runs the library's own clip and quantization on the plan's vector, so what `prism
weights`, `/v1/weights` and the logs show is what the chain stores, and a plan the chain
cannot accept is refused here with its reason instead of failing every epoch.

The chain's own test of the cap is exact (`check_vec_max_limited`: the largest value over
the sum, at most `max_weight_limit / 65535`), while the library's clip lands the top share
on the cap in floating point and u16 rounding then pushes it over by a hair about a third of
the time: the chain refuses that vector (`MaxWeightExceeded`). So the quantized vector is
tested with integers (`max * 65535 <= limit * sum`) and, when it fails, clipped again to a
slightly lower cap until it passes. With fewer than `65535 / max_weight_limit` uids no vector
passes at all (even equal weights exceed the cap): such a plan is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from bittensor.intents.weights import U16_MAX, clip_to_max_weight, normalize

from prism_challenge.chain.subtensor import ChainClient, ChainUnavailable, WeightsRules
from prism_challenge.weights.plan import WeightPlan


class WeightsImpossible(ValueError):
    """No vector the subnet accepts carries this plan; the message says which rule."""


def as_sent(plan: WeightPlan, rules: WeightsRules, self_uid: int | None, *,
            subnet_n: int | None = None) -> WeightPlan:
    """The plan with `uids` / `weights_u16` (and each row's u16) as the chain stores them.
    With `subnet_n` (the number of uids on the subnet, read now) the chain's checks of the
    uids themselves run too: on a commit-reveal subnet they run only at the reveal, where a
    failure drops the weights without a word, so they must pass before anything is sent."""
    uids, weights = list(plan.uids), [float(w) for w in plan.weights_u16]
    if not uids:
        raise WeightsImpossible("the plan has no non-zero weight")
    if subnet_n is not None:
        _check_uids(uids, subnet_n, plan.netuid)
    self_only = self_uid is not None and uids == [self_uid]  # the chain exempts it
    limit = rules.max_weight_limit
    if not self_only and limit < U16_MAX:
        out_uids, out_u16 = _within_limit(uids, weights, limit, plan.netuid)
    else:
        out_uids, out_u16 = normalize(uids, weights)
    if not self_only and len(out_uids) < rules.min_allowed_weights:
        raise WeightsImpossible(
            f"netuid {plan.netuid} requires at least {rules.min_allowed_weights} non-zero "
            f"weights (min_allowed_weights) but this plan pays {len(out_uids)} uid(s); the "
            "subnet owner must lower it, or more miners must score")
    notes = []
    if (out_uids, out_u16) != (plan.uids, plan.weights_u16):
        notes.append(f"clipped to the subnet's max_weight_limit {rules.max_weight_limit}/"
                     f"{U16_MAX} (share {rules.max_weight_limit / U16_MAX:.4f} at most)")
    u16_of = dict(zip(out_uids, out_u16, strict=True))
    rows = [row.model_copy(update={"u16": u16_of.get(row.uid, 0)}) for row in plan.rows]
    return plan.model_copy(update={"uids": out_uids, "weights_u16": out_u16, "rows": rows,
                                   "as_sent": "; ".join(notes) or "unchanged by the subnet's "
                                   "weight rules"})


def passes_max_weight(values: list[int], limit: int) -> bool:
    """The chain's `max_weight_limit` test, exactly: the largest share at most limit/65535."""
    return limit >= U16_MAX or max(values) * U16_MAX <= limit * sum(values)


def _within_limit(uids: list[int], weights: list[float], limit: int, netuid: int
                  ) -> tuple[list[int], list[int]]:
    """The u16 vector the library sends for these weights under `limit` that the chain's
    exact test accepts, and that the library, handed it back, sends unchanged."""
    if len(uids) * limit < U16_MAX:
        raise WeightsImpossible(
            f"netuid {netuid} caps a share at max_weight_limit {limit}/{U16_MAX}, so a vector "
            f"needs at least {-(-U16_MAX // limit)} non-zero weights; this plan pays "
            f"{len(uids)} uid(s): the subnet owner must raise the cap, or more miners must "
            "score")
    cap = limit / U16_MAX
    for step in range(40):
        target = cap * max(0.0, 1 - 1e-9 * 2**step)  # a hair lower each time it fails
        out_uids, out_u16 = normalize(uids, clip_to_max_weight(weights, target))
        again = normalize(out_uids, clip_to_max_weight([float(v) for v in out_u16], cap))
        if again == (out_uids, out_u16) and passes_max_weight(out_u16, limit):
            return out_uids, out_u16
    raise WeightsImpossible(  # not seen: equal weights pass whenever len(uids) * limit >= 65535
        f"no u16 vector for this plan passes netuid {netuid}'s max_weight_limit {limit}")


def _check_uids(uids: list[int], subnet_n: int, netuid: int) -> None:
    """DuplicateUids, UidsLengthExceedUidsInSubNet, UidVecContainInvalidOne."""
    if len(set(uids)) != len(uids):
        raise WeightsImpossible(f"the plan names a uid twice (DuplicateUids): {uids}")
    if len(uids) > subnet_n:
        raise WeightsImpossible(
            f"the plan pays {len(uids)} uids but netuid {netuid} has {subnet_n} "
            "(UidsLengthExceedUidsInSubNet); the plan is older than the metagraph")
    unknown = [u for u in uids if u >= subnet_n]
    if unknown:
        raise WeightsImpossible(
            f"uid(s) {unknown} are not on netuid {netuid}, which has uids 0..{subnet_n - 1} "
            "(UidVecContainInvalidOne); check weights.burn_uid")


def conform_online(plan: WeightPlan, client: ChainClient, self_uid: int | None) -> WeightPlan:
    """`as_sent` with the subnet's rules read now; the plan unchanged (with a note) when the
    chain cannot be read. Raises WeightsImpossible like `as_sent`."""
    try:
        rules = client.weights_rules()
    except ChainUnavailable as exc:
        return plan.model_copy(update={"as_sent": f"not conformed: the subnet's weight rules "
                                                  f"could not be read ({exc})"})
    return as_sent(plan, rules, self_uid)


class AsSent:
    """`conform_online` for a node's `/v1/weights`: the subnet's weight rules are read at
    most once per `max_age_s` (a block is 12 s), so a polled route costs no chain read per
    request; `self_uid` is read per call (this validator's uid can change)."""

    def __init__(self, client: ChainClient, self_uid: Callable[[], int | None], *,
                 max_age_s: float = 12.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.self_uid = self_uid
        self.max_age_s = max_age_s
        self.clock = clock
        self._lock = threading.Lock()
        self._rules: tuple[float, WeightsRules] | None = None

    def _rules_now(self) -> WeightsRules:
        with self._lock:
            now = self.clock()
            if self._rules is None or now - self._rules[0] >= self.max_age_s:
                self._rules = (now, self.client.weights_rules())
            return self._rules[1]

    def __call__(self, plan: WeightPlan) -> WeightPlan:
        """The plan as the chain would store it. Raises WeightsImpossible."""
        try:
            rules = self._rules_now()
        except ChainUnavailable as exc:
            return plan.model_copy(update={"as_sent": f"not conformed: the subnet's weight "
                                                      f"rules could not be read ({exc})"})
        return as_sent(plan, rules, self.self_uid())
