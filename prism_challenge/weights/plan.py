"""The weights plan: leaderboard + payout split -> uids -> u16 exactly as bittensor emits.

Only hotkeys the metagraph maps to a uid take part: the leader is replayed among registered
hotkeys, so a deregistered leader neither keeps its weight nor burns it. The u16 vector is
`bittensor.intents.normalize` (max-upscale to 65535, round, drop zeros), the same function
`bittensor.SetWeights` applies before a weight extrinsic is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bittensor.intents import normalize
from pydantic import BaseModel, ConfigDict
from sqlalchemy.orm import Session

from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.config.settings import Settings
from prism_challenge.scoring.leaderboard import Entry, build_leaderboard
from prism_challenge.weights.split import split_payout


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PlanRow(_Frozen):
    uid: int
    hotkey: str | None  # None for a burn uid no scored hotkey holds
    share: float
    u16: int
    bpb: float | None
    reasons: list[str]


class Excluded(_Frozen):
    hotkey: str
    reason: str


class WeightPlan(_Frozen):
    """What this validator would set: `uids` and `weights_u16` are the extrinsic's vectors."""

    netuid: int
    block: int | None
    corpus: str | None
    dry_run: bool
    leader: Entry | None
    uids: list[int]
    weights_u16: list[int]
    rows: list[PlanRow]
    excluded: list[Excluded]
    # How the subnet's weight rules changed the vectors (`weights.conform.as_sent`); None
    # when they were not read (local chain, or the chain unreachable).
    as_sent: str | None = None


def burn_target(metagraph: MetagraphView, settings: Settings) -> tuple[int, str | None]:
    """The uid the unassigned share goes to, and the hotkey it is meant for (None: whoever
    holds a configured uid). `weights.burn_uid: owner` follows the subnet owner's hotkey
    to whatever uid it holds, so the burn never pays a miner that took uid 0; where no owner
    is known (the local ledger, or no metagraph read yet) it is uid 0, the owner's uid on a
    new subnet. The setter checks the hotkey still holds the uid right before sending."""
    configured = settings.weights.burn_uid
    if configured != "owner":
        if metagraph.n and configured >= metagraph.n:
            raise ValueError(
                f"weights.burn_uid {configured} is not a uid of this subnet (n={metagraph.n})"
            )
        return configured, None
    owner = getattr(metagraph, "owner_hotkey", None) if metagraph.n else None
    if owner is None:
        return 0, None
    uid = metagraph.uid_of(owner)
    if uid is None:
        raise ValueError(
            f"weights.burn_uid is 'owner' but the subnet owner's hotkey {owner} holds no uid "
            f"on netuid {settings.chain.netuid}: set weights.burn_uid to the uid to burn to"
        )
    return uid, owner


def build_plan(
    entries: Iterable[Entry],
    metagraph: MetagraphView,
    settings: Settings,
    *,
    research_credit: Mapping[str, float] | None = None,
    corpus: str | None = None,
) -> WeightPlan:
    """Pure: the plan for these scored entries on this metagraph under these settings."""
    entries = list(entries)
    credit = dict(research_credit or {})
    uid_of = {hk: metagraph.uid_of(hk) for hk in {e.hotkey for e in entries} | set(credit)}
    registered = {hk for hk, uid in uid_of.items() if uid is not None}
    board = build_leaderboard(
        entries,
        epsilon=settings.scoring.epsilon_bpb,
        margin=settings.scoring.dethrone_margin,
        z=settings.scoring.dethrone_z,
        corpus=corpus,
        hotkeys=registered,
    )
    excluded = [
        Excluded(hotkey=hk, reason="not registered on the subnet (deregistered?)")
        for hk in sorted(
            {e.hotkey for e in entries if e.eligible and e.corpus == board.corpus} - registered
        )
    ]
    excluded += [
        Excluded(hotkey=hk, reason="research credit, but not registered on the subnet")
        for hk in sorted(set(credit) - registered)
        if credit[hk] > 0 and all(x.hotkey != hk for x in excluded)
    ]
    payout = split_payout(
        None if board.leader is None else board.leader.hotkey,
        {hk: c for hk, c in credit.items() if hk in registered},
        winner_share=settings.weights.winner_share,
        research_share=settings.weights.research_share,
    )
    rows: dict[int, dict] = {}

    def add(uid: int, hotkey: str | None, share: float, reason: str) -> None:
        row = rows.setdefault(uid, {"hotkey": hotkey, "share": 0.0, "reasons": []})
        row["hotkey"] = row["hotkey"] or hotkey
        row["share"] += share
        row["reasons"].append(reason)

    leader = board.leader
    for hk, share in payout.winner.items():
        add(
            uid_of[hk],
            hk,
            share,
            f"leader: submission {leader.submission_id} bpb {leader.bpb:.6f} on {board.corpus}"
            + (" (scored without LLM review)" if leader.unreviewed else ""),
        )
    for hk, share in payout.research.items():
        add(uid_of[hk], hk, share, f"research credit {credit[hk]:g}")
    if payout.burn > 0:
        burn_uid, holder = burn_target(metagraph, settings)
        why = "burn: nothing eligible" if leader is None and not payout.research else (
            f"burn: unassigned share {payout.burn:.6g}"
        )
        add(burn_uid, holder, payout.burn, why)

    ordered = sorted(rows)
    out_uids, out_u16 = normalize(ordered, [rows[u]["share"] for u in ordered])
    u16_of = dict(zip(out_uids, out_u16, strict=True))
    best = {s.entry.hotkey: s.entry.bpb for s in board.standings}
    if leader is not None:
        best[leader.hotkey] = leader.bpb  # the leader is paid for its leading submission
    plan_rows = []
    for uid in ordered:
        row = rows[uid]
        reasons = row["reasons"] + ([] if uid in u16_of else ["rounds to 0 in u16: not set"])
        plan_rows.append(
            PlanRow(
                uid=uid,
                hotkey=row["hotkey"],
                share=row["share"],
                u16=u16_of.get(uid, 0),
                bpb=best.get(row["hotkey"]),
                reasons=reasons,
            )
        )
    return WeightPlan(
        netuid=settings.chain.netuid,
        block=metagraph.block,
        corpus=board.corpus,
        dry_run=settings.weights.dry_run,
        leader=leader,
        uids=out_uids,
        weights_u16=out_u16,
        rows=plan_rows,
        excluded=excluded,
    )


def load_plan(
    session: Session,
    metagraph: MetagraphView,
    settings: Settings,
    *,
    research_credit: Mapping[str, float] | None = None,
    corpus: str | None = None,
    hotkey: str | None = None,
    now: float | None = None,
) -> WeightPlan:
    """The plan for everything scored in the store. With this validator's `hotkey` and
    `agreement.enabled`, runs rank on the shared-input aggregate (agreement/ranking.py).
    `corpus` None: the competition key this validator scores under now (`Ranked.corpus`)."""
    ranked = ranked_entries(session, settings, hotkey, now=now)
    return build_plan(
        ranked.entries, metagraph, settings,
        research_credit=research_credit, corpus=ranked.corpus if corpus is None else corpus,
    )
