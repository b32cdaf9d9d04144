"""The entries this validator ranks: its own, or the shared-input aggregate of them.

With `agreement.enabled` and peers known, each run this validator holds (scored here or
not) is ranked on `aggregate` over its own measurement and its peers' of the same digest,
miner hotkey, corpus and scoring version, weighted by the stakes stored by the peer loop.
The quorum is counted against the stake of every permitted validator, reachable or not:
a validator that reaches (itself included) no more than `quorum` of that stake ranks
nothing and says so (`Ranked.note`, a warning each epoch), rather than rank on a minority
that an unreachable majority, or peers answering only some validators, would outvote.
A run without a quorum yet is left out.

The competition key ranked on (`Ranked.corpus`) is the one this validator scores under now:
that of its own latest score, or, before its first score, the key the most counted stake
measures under; while no run of that key has a quorum yet, the most recent of its own keys
that has one (a new data version its peers have not measured yet keeps the old leader
paid). Peers' measurement times never choose it: a peer publishing a run of an old
key late, however recent its `measured_at`, cannot move the weights onto that key.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from prism_challenge.agreement.aggregate import Measurement, aggregate
from prism_challenge.agreement.equivocation import excluded
from prism_challenge.agreement.own import own_rows
from prism_challenge.config.settings import Settings
from prism_challenge.scoring.leaderboard import Entry, latest_corpus
from prism_challenge.scoring.queries import load_entries
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import AgreementPeer, PeerMeasurement, Score, Submission

_UNSCORED = ("received", "queued", "running")


@dataclass(frozen=True)
class Ranked:
    entries: list[Entry]
    shared: bool  # ranked on the aggregate (False: on this validator's own measurements)
    note: str  # one line for the log: what was ranked on, and why
    degraded: bool = False  # no quorum of the permitted stake reached: worth a warning
    no_quorum: bool = False  # nothing ranked: the epoch offers no weights (they stay as set)
    electorate: tuple[int, float] | None = None  # (validators reached, their permitted share)
    corpus: str | None = None  # the competition key weights are set on (None: nothing scored)


def ranked_entries(session: Session, settings: Settings, own_hotkey: str | None, *,
                   now: float | None = None) -> Ranked:
    own = load_entries(session)
    key = latest_corpus(own)  # the key of this validator's own latest score
    cfg = settings.agreement
    if not cfg.enabled:
        return Ranked(own, False, "own measurements (agreement.enabled is false)", corpus=key)
    if own_hotkey is None:
        return Ranked(own, False, "own measurements (this validator's hotkey is not known)",
                      corpus=key)
    now = time.time() if now is None else now
    stakes = electorate_stakes(session, own_hotkey, now=now,
                               stale_s=cfg.peer_stale_s)
    permitted = permitted_stake(session)
    known = session.scalar(select(func.count()).select_from(AgreementPeer).where(
        AgreementPeer.validator != own_hotkey)) or 0
    if not known:
        return Ranked(own, False, "own measurements: no peer validator is known", corpus=key)
    banned = excluded(session, now=now)
    stakes = {v: st for v, st in stakes.items() if v not in banned or v == own_hotkey}
    reached = sum(stakes.values())
    if permitted <= 0 or reached <= cfg.quorum * permitted:
        share = reached / permitted if permitted > 0 else 0.0
        return Ranked([], False, f"nothing: no quorum reachable; the {len(stakes)} "
                      f"validators reached (this one included, {len(stakes) - 1} of {known} "
                      f"peers answered with a good page in the last {cfg.peer_stale_s:g} s) "
                      f"hold {share:.1%} of the permitted stake, not more than the quorum "
                      f"{cfg.quorum:.1%} (agreement.quorum); weights stay as last set until "
                      "more peers answer", degraded=True, no_quorum=True,
                      electorate=(len(stakes), share), corpus=key)
    # every permitted validator's signed measurements held here count, reached lately
    # or not (relayed pages make every honest validator hold the same ones); a proven
    # equivocator's do not
    counting = {v: st for v, st in permitted_stakes(session).items() if v not in banned}
    counting[own_hotkey] = stakes[own_hotkey]
    measured = _measurements(session, own_hotkey, set(counting))
    corpus = key or _peers_key(session, counting)
    out = []
    for entry in own + _unscored(session, corpus, measured):
        ms = measured.get((entry.digest, entry.hotkey, entry.corpus), [])
        ranked = aggregate(entry, ms, counting, quorum=cfg.quorum, now=now,
                           settle_s=cfg.settle_s, permitted=permitted)
        if ranked is not None:
            out.append(ranked)
    corpus = _key_with_a_quorum(corpus, own, out)
    proven = f"; {len(banned)} excluded for equivocating" if banned else ""
    return Ranked(out, True, f"stake-weighted median over {len(stakes)} validators "
                  f"(stake {reached:g} of {permitted:g} permitted); {len(out)} of {len(own)} runs "
                  f"scored here or by peers have a quorum{proven}",
                  electorate=(len(stakes), reached / permitted), corpus=corpus)


def _key_with_a_quorum(key: str | None, own: list[Entry], ranked: list[Entry]) -> str | None:
    """`key` once a run of it has a quorum. Until then (this validator moved to a new data
    version or budget before its peers' measurements of it reached a quorum) the most
    recently scored of its own keys that has one, so the leader there is still paid rather
    than the share burnt. Only this validator's own score times choose among its keys."""
    held = {e.corpus for e in ranked}
    if key is None or key in held:
        return key
    for entry in sorted(own, key=lambda e: (e.scored_at, e.submission_id), reverse=True):
        if entry.corpus in held:
            return entry.corpus
    return key


def electorate_stakes(session: Session, own_hotkey: str, *, now: float, stale_s: float
                      ) -> dict[str, float]:
    """This validator (with its stake, which may be 0: a validator without a permit then
    ranks on its peers' measurements alone) and the peers with stake whose last good page
    is recent."""
    stakes = {own_hotkey: 0.0}
    for peer in session.scalars(select(AgreementPeer)):
        if peer.validator == own_hotkey:
            stakes[own_hotkey] = max(0.0, peer.stake)
        elif peer.stake > 0 and peer.last_ok_at is not None and peer.last_ok_at >= now - stale_s:
            stakes[peer.validator] = peer.stake
    return stakes


def permitted_stakes(session: Session) -> dict[str, float]:
    """Each validator the peer loop last saw permitted, with its stake."""
    return {p.validator: p.stake for p in session.scalars(
        select(AgreementPeer).where(AgreementPeer.stake > 0))}


def permitted_stake(session: Session) -> float:
    """The stake of every validator the peer loop last saw permitted, reached or not
    (this one included): what a quorum is counted against."""
    return float(session.scalar(select(func.coalesce(func.sum(AgreementPeer.stake), 0.0))
                                .where(AgreementPeer.stake > 0)) or 0.0)


def _measurements(session: Session, own_hotkey: str, validators: set[str]
                  ) -> dict[tuple[str, str, str], list[Measurement]]:
    """(digest, miner hotkey, corpus) -> measurements under this scoring version."""
    out: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for own in own_rows(session):
        r = own.row
        out[(r.digest, r.miner_hotkey, r.corpus)].append(Measurement(
            own_hotkey, r.bpb, r.heldout_delta, r.eligible, r.measured_at, r.verified_at,
            _parts(r.stream_parts)))
    rows = session.scalars(select(PeerMeasurement).where(
        PeerMeasurement.scoring_version == SCORING_VERSION,
        PeerMeasurement.validator != own_hotkey))
    for r in rows:
        if r.validator in validators:
            out[(r.digest, r.miner_hotkey, r.corpus)].append(Measurement(
                r.validator, r.bpb, r.heldout_delta, r.eligible, r.measured_at, r.verified_at,
                _parts(r.stream_parts)))
    return out


def _peers_key(session: Session, counting: dict[str, float]) -> str | None:
    """The competition key the most counted stake measures under: what a validator that
    has scored nothing yet ranks the runs it holds on (else it would rank nothing, a burn,
    until its own first score). On equal stake, the key the heaviest single validator
    measures under; the name decides only between keys equal on both."""
    stake: dict[str, float] = defaultdict(float)
    heaviest: dict[str, float] = defaultdict(float)
    for validator, key in {(v, k) for v, k in session.execute(
            select(PeerMeasurement.validator, PeerMeasurement.corpus)
            .where(PeerMeasurement.scoring_version == SCORING_VERSION))}:
        stake[key] += counting.get(validator, 0.0)
        heaviest[key] = max(heaviest[key], counting.get(validator, 0.0))
    if not any(stake.values()):
        return None
    return max(sorted(stake), key=lambda k: (stake[k], heaviest[k]))


def _parts(value: list[float] | None) -> tuple[float, ...] | None:
    return tuple(float(x) for x in value) if value else None


def _unscored(session: Session, corpus: str | None,
              measured: dict[tuple[str, str, str], list[Measurement]]) -> list[Entry]:
    """Runs this validator holds but has not scored yet, that peers measured: they rank on
    the peers' measurements as soon as those reach a quorum, like everywhere else."""
    if corpus is None:
        return []
    keys = {(d, h) for d, h, c in measured if c == corpus}
    if not keys:
        return []
    subs = session.scalars(select(Submission).where(
        Submission.status.in_(_UNSCORED),
        Submission.digest.in_(sorted(d for d, _ in keys)),
        ~Submission.id.in_(select(Score.submission_id))))
    return [Entry(submission_id=s.id, hotkey=s.hotkey, digest=s.digest, name=s.name,
                  accepted_at=s.accepted_at, block=s.block, uid=s.uid, bpb=0.0,
                  heldout_delta=0.0, eligible=False, corpus=corpus,
                  unreviewed=s.reviewed == "unreviewed")
            for s in subs if (s.digest, s.hotkey) in keys]
