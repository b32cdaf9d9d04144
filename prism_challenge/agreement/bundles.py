"""Runs known only from peers: fetch the bundle from a peer, check it, queue it here.

A miner uploads its bundle to each validator itself; one that was down, answered 429 or
503, or was skipped never holds it, and a validator never ranks a run it does not hold.
So every poll, for each (digest, miner) that permitted peers measured and this validator
does not hold as that miner's (a copy held for another hotkey counts: a miner that
committed it earlier takes the row over, as its own upload would), the peer loop:

1. reads the miner's latest commitment: it must name exactly this digest (the check a
   miner's own upload gets; a commitment superseded before the fetch leaves the run
   unfetched here, logged);
2. asks the peers that measured it, in turn, for `GET /v1/bundles/<digest>`, signed by
   this validator's hotkey for that peer (a peer serves its stored bundles to permitted
   validators only, never to miners); each request ends `timeout_s` after it began, and a
   peer is asked only while its share of the peer loop's round lasts (fetch.RoundBudget);
3. checks the bytes: a well-formed bundle whose canonical digest is the one asked for (a
   peer cannot substitute anything: the digest is the commitment's);
4. stores it as `received` (`intake/admission.py: admit_from_peer`), so it goes through the
   gates, is measured and served like an upload, and ranks on the peers' measurements
   before its own is made.

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
import time
from collections.abc import Callable

import httpx
from bittensor import http_auth
from sqlalchemy import select

from prism_challenge.agreement.equivocation import excluded
from prism_challenge.agreement.fetch import (
    PEER_ROUND_TIMEOUTS,
    PeerRefused,
    PeerTooSlow,
    PeerUnreachable,
    RoundBudget,
    read_within,
    time_left,
    within,
)
from prism_challenge.agreement.peers import Peer
from prism_challenge.api.errors import ApiError
from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.chain.subnet import Subnet
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
        whose share is spent is not asked, and a request ends by the end of that share."""
        budget = budget or RoundBudget(PEER_ROUND_TIMEOUTS * self.timeout_s)
        now = self.clock()
        urls = {p.hotkey: p for p in peers if p.url is not None}
        stored = 0
        for (digest, miner), measurers in self.candidates(peers, now):
            self.retry_at[digest] = now + RETRY_S
            try:
                commitment = self.subnet.latest_commitment(miner)
            except ChainUnavailable as exc:
                log.info("agreement: run %s of %s not fetched yet: %s", digest[:16], miner, exc)
                return stored
            if self._held_by_earlier(digest, commitment):
                continue  # a later copier's claim: the row stays with the earlier committer
            bundle = None
            for validator in measurers + [h for h in urls if h not in measurers]:
                if validator in urls:
                    bundle = budget.share(validator, lambda end, p=urls[validator], d=digest:
                                          self._get(p, d, budget, end), None)
                    if bundle is not None:
                        break
            if bundle is None:
                log.info("agreement: run %s of %s is known from peers, but no peer gave its "
                         "bundle; trying again in %g s", digest[:16], miner, RETRY_S)
                continue
            try:
                with self.store.session() as s:
                    row = admit_from_peer(s, hotkey=miner, bundle=bundle, commitment=commitment,
                                          metagraph=self.metagraph, policy=self.policy,
                                          now=self.clock(), settle_s=self.settle_s)
            except ApiError as exc:
                log.warning("agreement: run %s of %s fetched from a peer but not accepted "
                            "(%s): %s", digest[:16], miner, exc.rule, exc.detail)
                continue
            if row is not None:
                stored += 1
                self.fetched += 1
                self.retry_at.pop(digest, None)
                log.info("agreement: run %s of %s fetched from a peer and queued for the "
                         "gates (it never reached this validator)", digest[:16], miner)
        return stored

    def _get(self, peer: Peer, digest: str, budget: RoundBudget, deadline: float
             ) -> Bundle | None:
        """The bundle as `peer` serves it, whole by `timeout_s` after the request began
        and by `deadline` (the end of the peer's share of the round); None otherwise."""
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
                                       where=where)
            except httpx.HTTPError:
                return None

        try:
            wire = within(end, request, where)
        except PeerTooSlow as exc:
            budget.exhaust(peer.hotkey)
            log.info("agreement: peer %s gave no bundle in time (%s); not asked again this "
                     "round", peer.hotkey, exc)
            return None
        except (PeerUnreachable, PeerRefused):
            return None
        if wire is None:
            return None
        try:
            bundle = Bundle.from_wire(wire)
        except BundleError as exc:
            log.warning("agreement: peer %s served a bundle for %s that does not read: %s",
                        peer.hotkey, digest[:16], exc)
            return None
        if bundle.digest != digest:
            log.warning("agreement: peer %s served another bundle (%s) for %s; ignored",
                        peer.hotkey, bundle.digest[:16], digest[:16])
            return None
        return bundle
