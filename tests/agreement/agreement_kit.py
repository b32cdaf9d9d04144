"""Validators on 127.0.0.1 for the agreement tests: real wallets (sr25519 hotkeys made by
bittensor), real SQLite stores, the real app on a real uvicorn server, and real scores."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import bittensor
from bittensor import http_auth
from fastapi import Request
from fastapi.responses import Response

from prism_challenge.agreement.fetch import PeerFetcher
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.status import AgreementStatus
from prism_challenge.agreement.sync import PeerSync
from prism_challenge.agreement.wire import MEASUREMENTS_PATH, MeasurementRow, MeasurementsPage
from prism_challenge.api import ApiDeps
from prism_challenge.bundle import Bundle
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage import Store
from prism_challenge.storage.tables import Score, Submission, Verification
from prism_challenge.validator.app import create_app

NETUID = 7
LONG_AGO = time.time() - 3600  # scored and verified well before any settle window


def make_wallet(root: Path, name: str) -> bittensor.Wallet:
    wallet = bittensor.Wallet(name=name, hotkey="default", path=str(root))
    wallet.create_new_hotkey(use_password=False, overwrite=True, suppress=True)
    return wallet


def digest_of(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def signed_page(wallet: bittensor.Wallet, request: Request, rows: list[MeasurementRow], *,
                next: str | None, more: bool) -> Response:
    """A page of `rows` as the validator of `wallet` serves it: signed for the request."""
    body = MeasurementsPage(validator=wallet.hotkey.ss58_address, netuid=NETUID,
                            scoring_version=SCORING_VERSION, rows=rows, next=next,
                            more=more).model_dump_json().encode()
    asked = f"{MEASUREMENTS_PATH}?{request.url.query}"
    return Response(body, media_type="application/json",
                    headers=http_auth.sign(wallet, method="GET", path=asked, body=body))


def settings(*, dethrone_windows: int = 32, **agreement) -> Settings:
    """A validator's settings with `agreement` settings; `dethrone_windows`: the stretches
    it cuts the stream into (the most stream parts a row it stores may carry)."""
    return Settings(chain={"netuid": NETUID}, agreement=agreement,
                    scoring={"dethrone_windows": dethrone_windows},
                    weights={"winner_share": 1.0, "research_share": 0.0})


def add_scored(store: Store, *, name: str, miner: str, block: int, bpb: float,
               verified: bool = True, eligible: bool = True, at: float = LONG_AGO,
               bundle: Bundle | None = None, parts: list[float] | None = None) -> int:
    """A run scored (and its contender replay passed) on this validator; `bundle`: the
    real bundle it stores (its digest then names the run); `parts`: its stream parts."""
    digest, wire = (digest_of(name), b"x") if bundle is None else (bundle.digest,
                                                                     bundle.to_wire())
    with store.session() as s:
        sub = Submission(digest=digest, hotkey=miner, status="scored", attempts=1,
                         accepted_at=at, block=block, uid=block, updated_at=at,
                         reviewed="passed", name=name, bundle=wire)
        s.add(sub)
        s.flush()
        s.add(Score(submission_id=sub.id, bpb=bpb, heldout_delta=0.5, eligible=eligible,
                    reason=None, corpus="demo",
                    detail={} if parts is None else {"stream_parts": parts}, created_at=at))
        if verified:
            s.add(Verification(submission_id=sub.id, status="passed", attempts=1,
                               created_at=at + 1, updated_at=at + 1))
        return sub.id


@dataclass
class Node:
    """One validator: its wallet, store, served app and peer loop state."""

    name: str
    wallet: bittensor.Wallet
    store: Store
    settings: Settings
    metagraph: StaticMetagraph
    url: str | None = None
    status: AgreementStatus | None = None

    @property
    def hotkey(self) -> str:
        return self.wallet.hotkey.ss58_address

    def serve(self, live_server, **deps) -> str:
        """Serve the real app; `deps` overrides ApiDeps fields (e.g. a skewed `clock`)."""
        self.url = live_server(create_app(ApiDeps(
            settings=self.settings, store=self.store, metagraph=self.metagraph,
            hotkey=self.hotkey, signer=self.wallet, **deps)))
        return self.url

    def loop(self, *, bundles=None, max_rows_per_peer: int | None = None,
             **fetcher) -> PeerSync:
        """This node's peer loop as the validator runs it (its cursors kept from one
        `round` to the next; close `loop.fetcher` after); `bundles`: a BundleFetcher for
        runs known only from peers; `max_rows_per_peer`: the loop's bound on one
        validator's rows (its default when None)."""
        cfg = self.settings.agreement
        self.status = AgreementStatus()
        kwargs = dict(own_hotkey=self.hotkey, netuid=NETUID, timeout_s=cfg.timeout_s,
                      max_page_bytes=cfg.max_page_bytes, max_age_s=cfg.signature_max_age_s)
        loop = PeerSync(self.store, PeerFetcher(**(kwargs | fetcher)), self.status,
                        cfg.page_size, netuid=NETUID, relay=cfg.relay,
                        ban_s=cfg.equivocation_ban_s, skew_s=cfg.signature_max_age_s,
                        max_page_bytes=cfg.max_page_bytes, bundles=bundles,
                        max_stream_parts=self.settings.scoring.dethrone_windows)
        if max_rows_per_peer is not None:
            loop.max_rows_per_peer = max_rows_per_peer
        return loop

    def sync(self, peers: list[Peer], *, bundles=None, max_rows_per_peer: int | None = None,
             **fetcher) -> tuple[dict[str, int], AgreementStatus]:
        """One real round of the peer loop against `peers` (electorate[0] is this node),
        relaying included, by a loop of its own (every round starts from the beginning, as
        after a restart); the arguments are `loop`'s."""
        loop = self.loop(bundles=bundles, max_rows_per_peer=max_rows_per_peer, **fetcher)
        try:
            stored = loop.round(peers)
        finally:
            loop.fetcher.close()
        return stored, loop.status


def electorate_of(me: Node, others: list[Node], stakes: dict[str, float] | None = None
                  ) -> list[Peer]:
    stakes = stakes or {}
    return [Peer(me.hotkey, None, stakes.get(me.name, 1.0))] + [
        Peer(o.hotkey, o.url, stakes.get(o.name, 1.0)) for o in others]
