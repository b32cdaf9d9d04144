"""Each epoch: sync the metagraph (online) and compute the weights plan (dry-run by default).

The plan is logged and served at /v1/weights; it is sent on chain only when the operator
set `weights.dry_run: false` with `chain.mode: online` (the weights package checks both).
"""

from __future__ import annotations

import logging

from prism_challenge.config.settings import Settings
from prism_challenge.registry.service import Registry
from prism_challenge.storage import Store
from prism_challenge.validator import verification_jobs
from prism_challenge.weights import WeightPlan, load_plan, set_on_chain

log = logging.getLogger("prism.validator")


def run_epoch(settings: Settings, store: Store, metagraph, registry: Registry | None,
              *, slots: int | None = None) -> WeightPlan:
    """`slots`: the node's evaluation slots (as many contender replays may be queued)."""
    sync = getattr(metagraph, "sync", None)
    if callable(sync):
        sync()
    credit = None
    if settings.weights.research_share > 0 and registry is not None:
        credit = registry.research_credits()
    with store.session() as s:
        queued = verification_jobs.queue_contenders(s, settings, slots=slots)
        plan = load_plan(s, metagraph, settings, research_credit=credit)
    if queued:
        log.info("epoch: contender replays queued for submissions %s", queued)
    pairs = ", ".join(f"uid {u}={w}" for u, w in zip(plan.uids, plan.weights_u16, strict=True))
    leader = plan.leader.hotkey if plan.leader else "none"
    log.info("epoch: weights plan (%s) leader %s: %s", "dry-run" if plan.dry_run else "live",
             leader, pairs or "empty")
    if not settings.weights.dry_run:
        log.info("epoch: set_weights -> %s", set_on_chain(plan, settings, confirm=True))
    return plan
