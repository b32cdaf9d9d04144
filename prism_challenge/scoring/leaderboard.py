"""Ranking scored submissions and deriving the leader (docs/scoring.md).

Pure functions over `Entry` values. The ranking key is (bpb on an epsilon grid, larger
held-out delta, earlier precedence). Precedence is the commitment block then the uid
(chain/precedence.py), so it is the same on every validator whatever order the uploads
reached them in. The leader is not stored anywhere: it is derived by replaying the eligible
submissions in precedence order, where a challenger takes the lead only if it ranks ahead
of the leader AND its bpb is at least `dethrone_margin` (relative) plus `z` standard errors
of the paired difference (`paired_se`) below the leader's: a challenger within noise of the
leader does not dethrone it. The same scores therefore always give the same leader.

Only a verified run (its contender replay passed) can lead; `contenders` names the eligible
runs not yet verified that would take the lead if they were, best first. A run stopped early
is censored: its bpb is only a lower bound, so it is never ranked, never leads and is never a
contender; the board lists it apart.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable

from pydantic import BaseModel, ConfigDict, Field

from prism_challenge.chain.precedence import precedence
from prism_challenge.sandbox.record import corpus_name


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Entry(_Frozen):
    """One scored submission as the leaderboard sees it."""

    submission_id: int
    hotkey: str
    digest: str
    name: str | None = None
    accepted_at: float
    block: int | None = None  # of the commitment: precedence
    uid: int | None = None  # of the committer: precedence within a block
    bpb: float
    heldout_delta: float
    eligible: bool
    reason: str | None = None
    corpus: str
    unreviewed: bool = False  # scored without an LLM review (llm.enabled: false)
    scored_at: float = 0.0  # when this validator scored it (0: only peers measured it)
    # the newest counted measurement of it, by any validator's clock (shown, never ranked on:
    # `latest_corpus` and the ranking key read `scored_at`); None without the agreement
    measured_at: float | None = None
    # contender replay: "none" (not asked), "queued", "running", "passed", "failed",
    # "incomparable" (replayed on another stack: unverified here, not failed)
    verification: str = "none"
    censored: bool = False  # stopped early: `bpb` is the bound it was stopped on
    # the held-out bpb ± its standard error and the gap's bound gap - z * SE (shown, from
    # the stored score; None for scores recorded without them)
    heldout_bpb: float | None = None
    heldout_se: float | None = None
    gap: float | None = None
    gap_bound: float | None = None
    # the prequential bpb per equal stretch of the stream (ScoreResult.stream_parts): what the
    # dethrone rule pairs with the leader's; not shown
    stream_parts: list[float] | None = Field(default=None, exclude=True, repr=False)

    @property
    def verified(self) -> bool:
        return self.verification == "passed"

    @property
    def ranked(self) -> bool:
        """Eligible with a full score: may rank, lead and be verified."""
        return self.eligible and not self.censored


class Standing(_Frozen):
    rank: int
    leader: bool
    entry: Entry


class LeaderChange(_Frozen):
    """A moment the lead changed hands during the replay."""

    submission_id: int
    hotkey: str
    bpb: float
    accepted_at: float
    previous_submission_id: int | None


class Leaderboard(_Frozen):
    corpus: str | None
    epsilon_bpb: float
    dethrone_margin: float
    dethrone_z: float = 0.0
    leader: Entry | None
    standings: list[Standing]  # each hotkey's best eligible submission, best first
    ineligible: list[Entry]  # each hotkey's latest ineligible submission, with its reason
    censored: list[Entry] = []  # each hotkey's latest run stopped early (eligible otherwise)
    history: list[LeaderChange]
    # each hotkey's best eligible submission, of hotkeys scored here that are no longer
    # registered on the subnet: shown, never ranked (the weights leave them out too)
    departed: list[Entry] = []


def grid(bpb: float, epsilon: float) -> float:
    """The epsilon-grid cell of a bpb (a tiny nudge keeps 0.3/0.1 in cell 3, not 2)."""
    if epsilon <= 0:
        return bpb
    return float(math.floor(bpb / epsilon + 1e-9))


def order_key(entry: Entry) -> tuple:
    """Precedence: commitment block, uid; then this validator's acceptance time and id."""
    return precedence(entry.block, entry.uid, entry.accepted_at, entry.submission_id)


def rank_key(entry: Entry, epsilon: float) -> tuple:
    """Smaller is better: grid cell, then larger held-out delta, then precedence."""
    return (grid(entry.bpb, epsilon), -entry.heldout_delta, *order_key(entry))


def paired_se(a: list[float] | None, b: list[float] | None) -> float | None:
    """Standard error of sum(a) - sum(b), two runs' bpb split over the same stretches of the
    same stream; None unless both have the same number (>= 3) of stretches.

    The stretches are paired (same text), so the text's own difficulty cancels in each
    difference d_i. Their variance is estimated from successive differences
    (sum (d_{i+1} - d_i)^2 / (2 (W - 1)), von Neumann): a learning curve's smooth trend (one
    model ahead early, level later) is a real, deterministic advantage, not noise, and this
    estimator does not count it; the stretch-to-stretch jitter is what other text would move.
    SE = sqrt(W * var)."""
    if not a or not b or len(a) != len(b) or len(a) < 3:
        return None
    d = [x - y for x, y in zip(a, b, strict=True)]
    if not all(math.isfinite(x) for x in d):
        return None
    var = sum((d[i + 1] - d[i]) ** 2 for i in range(len(d) - 1)) / (2 * (len(d) - 1))
    return math.sqrt(len(d) * var)


def dethrones(challenger: Entry, leader: Entry, *, epsilon: float, margin: float,
              z: float = 0.0) -> bool:
    """Ranks ahead of the leader and beats its bpb by the relative margin plus `z` standard
    errors of the paired difference (when both runs carry their stream parts)."""
    noise = z * (paired_se(challenger.stream_parts, leader.stream_parts) or 0.0)
    return (
        rank_key(challenger, epsilon) < rank_key(leader, epsilon)
        and challenger.bpb <= (1.0 - margin) * leader.bpb - noise
    )


def replay_leader(
    entries: Iterable[Entry], *, epsilon: float, margin: float, z: float = 0.0
) -> tuple[Entry | None, list[LeaderChange]]:
    """Replay eligible, verified entries in precedence order; return the leader and every
    change of lead."""
    leader: Entry | None = None
    history: list[LeaderChange] = []
    for entry in sorted((e for e in entries if e.ranked and e.verified), key=order_key):
        if leader is None or dethrones(entry, leader, epsilon=epsilon, margin=margin, z=z):
            history.append(
                LeaderChange(
                    submission_id=entry.submission_id,
                    hotkey=entry.hotkey,
                    bpb=entry.bpb,
                    accepted_at=entry.accepted_at,
                    previous_submission_id=None if leader is None else leader.submission_id,
                )
            )
            leader = entry
    return leader, history


def contenders(entries: Iterable[Entry], *, epsilon: float, margin: float,
               corpus: str | None = None, z: float = 0.0,
               hotkeys: Collection[str] | None = None) -> list[Entry]:
    """Eligible entries never sent to verification that would lead if verified, best first.

    With no verified leader, every eligible entry qualifies; otherwise only those that
    dethrone the verified leader. `hotkeys`, when given, restricts both to those hotkeys
    (the registered ones), as the weights are: a deregistered leader sets no bar, and a
    deregistered hotkey's run takes no replay.
    """
    entries = list(entries)
    corpus = resolve_corpus(entries, corpus)
    pool = [e for e in entries if e.corpus == corpus and e.ranked
            and (hotkeys is None or e.hotkey in hotkeys)]
    leader, _ = replay_leader(pool, epsilon=epsilon, margin=margin, z=z)
    found = [e for e in pool if e.verification == "none" and (
        leader is None or dethrones(e, leader, epsilon=epsilon, margin=margin, z=z))]
    return sorted(found, key=lambda e: rank_key(e, epsilon))


def best_per_hotkey(entries: Iterable[Entry], epsilon: float) -> list[Entry]:
    """Each hotkey's best eligible entry with a full score, best first."""
    best: dict[str, Entry] = {}
    for e in entries:
        if e.ranked and (
            e.hotkey not in best or rank_key(e, epsilon) < rank_key(best[e.hotkey], epsilon)
        ):
            best[e.hotkey] = e
    return sorted(best.values(), key=lambda e: rank_key(e, epsilon))


def latest_corpus(entries: Iterable[Entry]) -> str | None:
    """The corpus (competition key) of the most recent score: what this validator scores
    on now."""
    latest = max(entries, key=lambda e: (e.scored_at, e.submission_id), default=None)
    return None if latest is None else latest.corpus


class UnknownCorpus(ValueError):
    """A corpus asked for that no score is kept under; the message lists those that are."""


def resolve_corpus(entries: Iterable[Entry], asked: str | None, *, strict: bool = False
                   ) -> str | None:
    """The competition key `asked` names: the latest scored one when None; itself when
    scores are kept under it; for a bare corpus name ("fineweb-edu"), the most recently
    scored key of that corpus. Anything else is returned as is (an empty board), or, with
    `strict`, refused with the keys that exist (setting weights on a board that matches
    nothing would burn them all)."""
    entries = list(entries)
    if asked is None:
        return latest_corpus(entries)
    keys = {e.corpus for e in entries}
    if asked in keys:
        return asked
    named = latest_corpus(e for e in entries if corpus_name(e.corpus) == asked)
    if named is not None:
        return named
    if strict and keys:
        raise UnknownCorpus(f"no score is kept under corpus {asked!r}; scores exist under "
                            f"{', '.join(sorted(keys))} (a key, or a corpus name for its "
                            "latest key)")
    return asked


def build_leaderboard(
    entries: Iterable[Entry],
    *,
    epsilon: float,
    margin: float,
    corpus: str | None = None,
    hotkeys: Collection[str] | None = None,
    z: float = 0.0,
) -> Leaderboard:
    """The leaderboard of one corpus (default: the latest one scored).

    Scores on different corpora are never compared. `hotkeys`, when given, restricts the
    competition to those hotkeys (the registered ones), so a deregistered leader hands the
    lead to whoever the replay picks without it; the others' best runs are `departed`.
    """
    entries = list(entries)
    corpus = resolve_corpus(entries, corpus)
    scored = [e for e in entries if e.corpus == corpus]
    pool = [e for e in scored if hotkeys is None or e.hotkey in hotkeys]
    departed = best_per_hotkey([e for e in scored if hotkeys is not None
                                and e.hotkey not in hotkeys], epsilon)
    leader, history = replay_leader(pool, epsilon=epsilon, margin=margin, z=z)
    standings = [
        Standing(
            rank=i + 1,
            leader=leader is not None and e.hotkey == leader.hotkey,
            entry=e,
        )
        for i, e in enumerate(best_per_hotkey(pool, epsilon))
    ]
    latest_bad: dict[str, Entry] = {}
    latest_censored: dict[str, Entry] = {}
    for e in sorted(pool, key=order_key):
        if not e.eligible:
            latest_bad[e.hotkey] = e
        elif e.censored:
            latest_censored[e.hotkey] = e
    return Leaderboard(
        corpus=corpus,
        epsilon_bpb=epsilon,
        dethrone_margin=margin,
        dethrone_z=z,
        leader=leader,
        standings=standings,
        ineligible=sorted(latest_bad.values(), key=lambda e: -e.accepted_at),
        censored=sorted(latest_censored.values(), key=lambda e: -e.accepted_at),
        history=history,
        departed=departed,
    )
