"""Runs known only from peers: fetch the bundle from a peer, check it, queue it here.

A miner uploads its bundle to each validator itself; one that was down, answered 429 or
503, or was skipped never holds it, and a validator never ranks a run it does not hold.
So every poll, for each (digest, miner) that permitted peers measured and this validator
does not hold as that miner's (a copy held for another hotkey counts: a miner that
committed it earlier takes the row over, as its own upload would), the peer loop:

1. reads the miner's latest commitment: it must name exactly this digest (the check a
   miner's own upload gets; a commitment superseded before the fetch leaves the run
   unfetched here, logged);
2. asks peers for `GET /v1/bundles/<digest>`, signed by this validator's hotkey for that
   peer (a peer serves its stored bundles to permitted validators only, never to miners):
   every peer with an address at once, each in a thread of its own that asks it for one
   bundle at a time, the runs it measured first (`fetch.ask_at_once`). A bundle is asked
   of one peer at a time while that request is answered within `ASK_ANOTHER_AFTER` of a
   timeout, so a peer that serves it promptly is the only one asked; once the request
   failed, or is still going by then, another peer is asked too. So however many peers
   drip bundles, the bundles of a round come from the others within about one timeout.
   Once one peer gave a bundle, the requests for it still going on are given up (closed,
   not waited for): the round does not wait out a peer dripping it, and that peer is
   charged the time until then only, its share of the round not spent.
   Each request ends `timeout_s` after it began, and a peer is asked only while its share
   of the peer loop's round lasts (fetch.RoundBudget): one whose request ran out of time
   is asked nothing more that round;
3. checks the bytes: only bytes whose sha256 is the digest asked for are kept (the
   canonical digest: a peer cannot substitute anything, the digest is the commitment's),
   the first such bytes of each bundle whichever peer served them (any other peer would
   serve the same bytes); once every peer is done, the round's own thread reads them as a
   bundle (a well-formed one, under the upload's rules);
4. stores it as `received` (`intake/admission.py: admit_from_peer`), once, in the order
   the runs were picked, so it goes through the gates, is measured and served like an
   upload, and ranks on the peers' measurements before its own is made.

Only runs measured by permitted validators not excluded for equivocation are fetched, at
most `MAX_PER_ROUND` a poll, taken in turn from each measuring validator's runs (oldest row
first; the validators by stake, the first of them one further each poll): a validator
serving rows of runs that do not exist spends its own turns on them, never another's.

A run whose bundle no peer can give (every one that holds it is down, or none of them
measured it) is retried after `RETRY_S`; it ranks nowhere that does not hold it, and where
it is held it ranks once a quorum of the permitted stake has measured it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from bittensor import http_auth
from sqlalchemy import select

from prism_challenge.agreement.equivocation import excluded
from prism_challenge.agreement.fetch import (
    PEER_ROUND_TIMEOUTS,
    NotNeeded,
    PeerRefused,
    PeerTooSlow,
    PeerUnreachable,
    RoundBudget,
    ask_at_once,
    read_within,
    time_left,
    within,
)
from prism_challenge.agreement.peers import Peer
from prism_challenge.api.errors import ApiError
from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.bundle.wire import digest_of
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.chain.subnet import Commitment, Subnet
from prism_challenge.chain.subtensor import ChainUnavailable
from prism_challenge.intake.admission import admit_from_peer, precedes_holder
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage import Store
from prism_challenge.storage.tables import PeerMeasurement, Submission

log = logging.getLogger("prism.agreement")

BUNDLES_PATH = "/v1/bundles"
MAX_PER_ROUND = 8  # bundles fetched per poll; more wait for the next
RETRY_S = 300.0  # a run whose bundle could not be had is tried again after this
# A bundle being asked of one peer is asked of another too once that request has gone on
# for this share of `timeout_s` (sooner when it failed): one download while peers answer
# promptly, and no more than about one timeout lost to peers that drip.
ASK_ANOTHER_AFTER = 0.25


@dataclass(frozen=True)
class _Run:
    """A run whose bundle is asked for this round: its miner's latest commitment (read before
    asking) and the validators that measured it."""

    digest: str
    miner: str
    commitment: Commitment | None
    measurers: list[str]


class _Asking:
    """The bundles of one round and who is being asked for them, shared by the round's
    threads (one a peer): `got` keeps the first bytes of each that hash to its digest."""

    def __init__(self, again_s: float) -> None:
        self.again_s = again_s
        self.got: dict[str, bytes] = {}
        self.asking: Counter[str] = Counter()  # requests going on, per digest
        self.changed = threading.Condition()

    def next(self, pending: list[str], deadline: float) -> str | None:
        """Which of `pending` (one peer's bundles not asked of it yet, in its order) that
        peer asks for now, taken off the list: the first not had yet and not being asked of
        another peer; when every one left is being asked of another, the first of them once
        `again_s` has passed and none has come (so a peer that drips holds a bundle that
        long at most). None when none is left, or at `deadline` (the end of its share)."""
        again_at = time.monotonic() + self.again_s
        with self.changed:
            while True:
                pending[:] = [d for d in pending if d not in self.got]
                now = time.monotonic()
                if not pending or now >= deadline:
                    return None
                digest = next((d for d in pending if not self.asking[d]), None)
                if digest is None and now >= again_at:
                    digest = pending[0]
                if digest is not None:
                    pending.remove(digest)
                    self.asking[digest] += 1
                    return digest
                self.changed.wait(min(again_at, deadline) - now)

    def answered(self, digest: str, wire: bytes | None) -> None:
        """A request for `digest` ended: `wire`, bytes that hash to it, or None."""
        with self.changed:
            self.asking[digest] -= 1
            if wire is not None:
                self.got.setdefault(digest, wire)
            self.changed.notify_all()


class BundleFetcher:
    def __init__(self, store: Store, subnet: Subnet, metagraph: MetagraphView, signer, *,
                 policy: IntakePolicy, settle_s: float, timeout_s: float,
                 client: httpx.Client | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.subnet, self.metagraph, self.signer = store, subnet, metagraph, signer
        self.policy, self.settle_s, self.clock = policy, settle_s, clock
        self.timeout_s = timeout_s
        self.client = client or httpx.Client(timeout=timeout_s, follow_redirects=False)
        self.retry_at: dict[str, float] = {}
        self.fetched = 0
        self.polls = 0  # rounds so far: where the turn among measuring validators starts

    def close(self) -> None:
        self.client.close()

    def missing(self) -> dict[tuple[str, str], list[str]]:
        """(digest, miner) -> the validators that measured it, for runs not held here as
        that miner's. A bundle held here for another hotkey counts as missing: peers may
        know its earlier committer, who then takes the row over (`admit_from_peer`)."""
        out: dict[tuple[str, str], list[str]] = {}
        with self.store.session() as s:
            held = {(d, h) for d, h in s.execute(
                select(Submission.digest, Submission.hotkey)
                .where(Submission.digest.in_(select(PeerMeasurement.digest))))}
            for digest, miner, validator in s.execute(
                    select(PeerMeasurement.digest, PeerMeasurement.miner_hotkey,
                           PeerMeasurement.validator)
                    .where(PeerMeasurement.scoring_version == SCORING_VERSION)
                    .order_by(PeerMeasurement.id)):
                if (digest, miner) not in held:
                    out.setdefault((digest, miner), []).append(validator)
        return out

    def candidates(self, peers: list[Peer], now: float
                   ) -> list[tuple[tuple[str, str], list[str]]]:
        """The missing runs to try this poll, at most MAX_PER_ROUND, with the validators
        that measured them: runs not waiting out `RETRY_S`, measured by a permitted peer
        (stake above 0) not excluded for equivocation, taken in turn from each such
        validator's runs (oldest row first). Validators go by stake (the largest first),
        and each poll starts one further along, so every one gets its turns."""
        stakes = {p.hotkey: p.stake for p in peers if p.stake > 0}
        with self.store.session() as s:
            counted = stakes.keys() - excluded(s, now=time.time())
        runs: dict[tuple[str, str], list[str]] = {}
        queues: dict[str, list[tuple[str, str]]] = {}
        for key, measurers in self.missing().items():
            by = [v for v in measurers if v in counted]
            if by and self.retry_at.get(key[0], 0) <= now:
                runs[key] = by
                for validator in by:
                    queues.setdefault(validator, []).append(key)
        order = sorted(queues, key=lambda v: (-stakes[v], v))
        start = self.polls % len(order) if order else 0
        self.polls += 1
        turns = [iter(queues[v]) for v in order[start:] + order[:start]]
        picked: dict[tuple[str, str], list[str]] = {}
        while turns and len(picked) < MAX_PER_ROUND:
            for turn in list(turns):
                key = next((k for k in turn if k not in picked), None)
                if key is None:
                    turns.remove(turn)
                elif len(picked) < MAX_PER_ROUND:
                    picked[key] = runs[key]
        return list(picked.items())

    def _held_by_earlier(self, digest: str, commitment) -> bool:
        """The bundle is held here for a hotkey that committed it no later than `commitment`
        (no fetch then: the miner's claim could not take the row over)."""
        if commitment is None:
            return False
        with self.store.session() as s:
            return precedes_holder(s, digest, commitment, self.metagraph) is False

    def round(self, peers: list[Peer], *, budget: RoundBudget | None = None) -> int:
        """Fetch up to MAX_PER_ROUND missing bundles (`candidates`); returns how many were
        stored.

        `budget`: each peer's share of the peer loop's round (a new one when None): a peer
        whose share is spent is not asked, and its requests end by the end of that share.
        The peers are asked at once, each in a thread that only fetches; once every one is
        done, this thread reads and stores the bundles in the order the runs were picked,
        each once however many peers served it."""
        budget = budget or RoundBudget(PEER_ROUND_TIMEOUTS * self.timeout_s)
        runs = self._to_fetch(peers, self.clock())
        urls = {p.hotkey: p for p in peers if p.url is not None}
        asked = _asked_of(runs, urls)
        asking = _Asking(ASK_ANOTHER_AFTER * self.timeout_s)
        ask_at_once([urls[h] for h in asked], lambda peer: budget.share(
            peer.hotkey, lambda end: self._ask(peer, asked[peer.hotkey], asking, budget, end),
            None))
        stored = 0
        for run in runs:
            stored += self._store(run, asking.got.get(run.digest))
        return stored

    def _to_fetch(self, peers: list[Peer], now: float) -> list[_Run]:
        """This poll's candidates with their miner's latest commitment, but for those a
        bundle held here for an earlier committer already covers. A chain that does not
        answer leaves the candidates from there on for a later poll."""
        runs = []
        for (digest, miner), measurers in self.candidates(peers, now):
            self.retry_at[digest] = now + RETRY_S
            try:
                commitment = self.subnet.latest_commitment(miner)
            except ChainUnavailable as exc:
                log.info("agreement: run %s of %s not fetched yet: %s", digest[:16], miner, exc)
                break
            if self._held_by_earlier(digest, commitment):
                continue  # a later copier's claim: the row stays with the earlier committer
            runs.append(_Run(digest, miner, commitment, measurers))
        return runs

    def _ask(self, peer: Peer, pending: list[str], asking: _Asking, budget: RoundBudget,
             deadline: float) -> None:
        """Ask `peer` for the bundles of `pending` (in order) that no other peer gave yet, one
        at a time, until none is left or its share of the round is spent (a thread of the
        round's pool: it keeps the bytes, reads no bundle and writes nothing to the store)."""
        while not budget.spent(peer.hotkey):
            digest = asking.next(pending, deadline)
            if digest is None:
                return
            wire = None
            try:
                wire = self._get(peer, digest, budget, deadline, asking)
            finally:
                asking.answered(digest, wire)

    def _store(self, run: _Run, wire: bytes | None) -> int:
        """Read the bytes peers gave for the run as a bundle and queue it as the miner's
        (`admit_from_peer`, the upload's checks); returns 1 when a row was stored."""
        digest, miner = run.digest, run.miner
        if wire is None:
            log.info("agreement: run %s of %s is known from peers, but no peer gave its "
                     "bundle; trying again in %g s", digest[:16], miner, RETRY_S)
            return 0
        try:
            bundle = Bundle.from_wire(wire)
        except BundleError as exc:
            log.warning("agreement: run %s of %s: the bytes of its digest peers served do "
                        "not read as a bundle: %s", digest[:16], miner, exc)
            return 0
        try:
            with self.store.session() as s:
                row = admit_from_peer(s, hotkey=miner, bundle=bundle,
                                      commitment=run.commitment, metagraph=self.metagraph,
                                      policy=self.policy, now=self.clock(),
                                      settle_s=self.settle_s)
        except ApiError as exc:
            log.warning("agreement: run %s of %s fetched from a peer but not accepted "
                        "(%s): %s", digest[:16], miner, exc.rule, exc.detail)
            return 0
        if row is None:
            return 0
        self.fetched += 1
        self.retry_at.pop(digest, None)
        log.info("agreement: run %s of %s fetched from a peer and queued for the gates (it "
                 "never reached this validator)", digest[:16], miner)
        return 1

    def _get(self, peer: Peer, digest: str, budget: RoundBudget, deadline: float,
             asking: _Asking) -> bytes | None:
        """The bytes `peer` serves for `digest` when their sha256 is that digest, whole by
        `timeout_s` after the request began and by `deadline` (the end of the peer's share
        of the round), at most the upload's `max_body_bytes`; None otherwise. The request
        is given up as soon as another peer gave the bundle (`asking.got`): the round does
        not wait for it, and the peer is charged only the time until then (its share of
        the round is not spent, as it would be by a request that ran out of time)."""

        def needed() -> bool:
            return digest not in asking.got

        path = f"{BUNDLES_PATH}/{digest}"
        where = f"{peer.url}{path}"
        end = min(time.monotonic() + self.timeout_s, deadline)
        headers = http_auth.sign(self.signer, method="GET", path=path, body=b"",
                                 receiver_ss58=peer.hotkey)

        def request() -> bytes | None:
            try:
                with self.client.stream("GET", peer.url.rstrip("/") + path, headers=headers,
                                        timeout=time_left(end, where)) as response:
                    if response.status_code != 200:
                        return None
                    return read_within(response, deadline=end,
                                       max_bytes=self.policy.max_body_bytes,
                                       oversized=lambda: PeerRefused("oversized", where),
                                       where=where, needed=needed)
            except httpx.HTTPError:
                return None

        try:
            wire = within(end, request, where, changed=asking.changed, needed=needed)
        except NotNeeded:
            log.debug("agreement: bundle %s asked of %s came from another peer first; "
                      "its request was given up", digest[:16], peer.hotkey)
            return None
        except PeerTooSlow as exc:
            budget.exhaust(peer.hotkey)
            log.info("agreement: peer %s gave no bundle in time (%s); not asked again this "
                     "round", peer.hotkey, exc)
            return None
        except (PeerUnreachable, PeerRefused):
            return None
        if wire is None:
            return None
        if digest_of(wire) != digest:
            log.warning("agreement: peer %s served other bytes (sha256 %s) for bundle %s; "
                        "ignored", peer.hotkey, digest_of(wire)[:16], digest[:16])
            return None
        return wire


def _asked_of(runs: list[_Run], urls: dict[str, Peer]) -> dict[str, list[str]]:
    """Peer (with an address) -> the bundles it may be asked for, in order: the runs it
    measured first (it should hold them), then the others (any peer may hold one). The
    peers that measured a run come first, so their threads start first."""
    order = [v for run in runs for v in run.measurers if v in urls] + list(urls)
    asked = {}
    for hotkey in dict.fromkeys(order):
        digests = [run.digest for run in runs if hotkey in run.measurers] + [
            run.digest for run in runs if hotkey not in run.measurers]
        if digests:
            asked[hotkey] = list(dict.fromkeys(digests))
    return asked
