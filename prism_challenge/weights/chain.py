"""Putting a weights plan on chain: the only code here that writes to the subnet.

Two locks must both be open: the operator passes `--set` (`confirm=True`) AND the config
says `weights.dry_run: false`. The extrinsic goes through `bittensor.SetWeights`, which
re-applies the subnet's max-weight clip and the same u16 normalisation as the plan.
This path needs a live chain and a funded, registered wallet; the test suite cannot run it
and only checks that it refuses when a lock is closed.
"""

from __future__ import annotations

from prism_challenge.config.settings import Settings
from prism_challenge.weights.plan import WeightPlan


class WeightsLocked(RuntimeError):
    """Setting weights was asked for but is not enabled; the message says which lock."""


def check_unlocked(settings: Settings, *, confirm: bool) -> None:
    if not confirm:
        raise WeightsLocked("weights are only set on chain with an explicit --set flag")
    if settings.weights.dry_run:
        raise WeightsLocked("weights.dry_run is true in the config; set it to false to set weights")
    if settings.chain.mode != "online":
        raise WeightsLocked("chain.mode is 'local'; weights can only be set in 'online' mode")


def set_on_chain(plan: WeightPlan, settings: Settings, *, confirm: bool) -> str:
    """Submit `plan` with the configured wallet; returns bittensor's result as text."""
    check_unlocked(settings, confirm=confirm)
    if not plan.uids:
        raise WeightsLocked("the plan has no non-zero weight; refusing to send an empty vector")
    import bittensor

    wallet = bittensor.Wallet(
        settings.wallet.name, settings.wallet.hotkey, path=settings.wallet.path
    )
    intent = bittensor.SetWeights(
        netuid=plan.netuid, uids=plan.uids, weights=[float(w) for w in plan.weights_u16]
    )
    result = bittensor.Subtensor(settings.chain.network).execute(intent, wallet)
    return str(result.raise_for_failure())
