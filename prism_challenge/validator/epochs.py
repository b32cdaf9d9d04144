"""Each epoch: compute the weights plan, and offer it to the chain when setting is enabled.

The plan is logged and served at /v1/weights; it is sent on chain only when the operator
set `weights.dry_run: false` with `chain.mode: online`, and then only when the subnet's
rate limit allows (the `WeightSetter` decides). Without a quorum of peers the plan is not
sent; the weights last set are sent again only when the chain would otherwise count this
validator inactive. The metagraph is refreshed by the node's chain loop on its own block
schedule, not here.
"""

from __future__ import annotations

import logging

from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.agreement.status import AgreementStatus
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.config.settings import Settings
from prism_challenge.registry.service import Registry
from prism_challenge.storage import Store
from prism_challenge.verification import jobs as verification_jobs
from prism_challenge.weights import WeightPlan, build_plan
from prism_challenge.weights.chain import WeightSetter

log = logging.getLogger("prism.validator")


def run_epoch(settings: Settings, store: Store, metagraph: MetagraphView,
              registry: Registry | None, setter: WeightSetter | None = None, *,
              slots: int | None = None, hotkey: str | None = None,
              agreement: AgreementStatus | None = None) -> WeightPlan | None:
    """`slots`: the node's evaluation slots (as many contender replays may be queued);
    `hotkey`: this validator's, so runs rank on the shared-input aggregate (agreement);
    `agreement`: where the electorate ranked on is reported (its /metrics gauges). None, with
    one warning naming the fix, when no plan can be built (`weights.burn_uid` names no uid of
    this subnet, or a bad research credit): the epoch loop goes on, a validator without a
    quorum still keeps its last weights active, and the CLI and /v1/weights show the same
    error."""
    credit = None
    if settings.weights.research_share > 0 and registry is not None:
        credit = registry.research_credits()
    with store.session() as s:
        ranked = ranked_entries(s, settings, hotkey)
        queued = verification_jobs.queue_contenders(s, settings, slots=slots,
                                                    entries=ranked.entries,
                                                    metagraph=metagraph, corpus=ranked.corpus)
        try:  # weights go on the key this validator scores under now, never a peer's pick
            plan = build_plan(ranked.entries, metagraph, settings, research_credit=credit,
                              corpus=ranked.corpus)
        except ValueError as exc:  # weights.burn_uid names no uid here, or a bad credit
            plan, problem = None, str(exc)
    (log.warning if ranked.degraded else log.info)("epoch: ranking on %s", ranked.note)
    if agreement is not None and ranked.electorate is not None:
        agreement.saw_electorate(*ranked.electorate)
    if queued:
        log.info("epoch: contender replays queued for submissions %s", queued)
    if plan is None:
        log.warning("epoch: no weights plan: %s", problem)
        if setter is not None and not settings.weights.dry_run and ranked.no_quorum:
            setter.keep_active(metagraph)  # the weights last set need no burn uid
        return None
    pairs = ", ".join(f"uid {u}={w}" for u, w in zip(plan.uids, plan.weights_u16, strict=True))
    leader = plan.leader.hotkey if plan.leader else "none"
    live = setter is not None and not plan.dry_run  # local chain: there is nothing to send to
    log.info("epoch: weights plan (%s) leader %s: %s", "live" if live else "not sent",
             leader, pairs or "empty")
    if setter is not None and not settings.weights.dry_run:
        if ranked.no_quorum:  # the weights last set stand, re-sent before the chain's
            setter.keep_active(metagraph)  # activity cutoff counts this validator inactive
        else:
            setter.offer(plan, metagraph)
    return plan
