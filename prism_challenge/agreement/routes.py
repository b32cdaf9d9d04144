"""The agreement routes: what one validator serves the others.

- `GET /v1/measurements`: this validator's own measurements, a page at a time, signed.
  The body is `MeasurementsPage` JSON; the `X-Bittensor-*` response headers are the
  validator hotkey's `btauth/1` signature over the request target and the exact body bytes
  (agreement/wire.py), which is what a peer checks before it stores anything.
- `GET /v1/relay`: the signed pages of other validators this one holds, as signed (each
  carries its author's signature, so the answer itself needs none).
- `GET /v1/equivocations`: the proofs of equivocation in force here (about three pages'
  worth at most); one-page proofs only with `?one_page=true` (an asker that checks them).
- `GET /v1/bundles/<digest>`: a stored bundle, to a permitted validator only (the request
  signed by its hotkey for this one): how a run that never reached a validator gets there.
"""

from __future__ import annotations

from typing import Annotated

from bittensor import http_auth
from bittensor.signing import resolve_signer
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response
from sqlalchemy import select

from prism_challenge.agreement.equivocation import proofs_in_force
from prism_challenge.agreement.own import next_cursor, own_rows
from prism_challenge.agreement.signed import Signed
from prism_challenge.agreement.wire import (
    CURSOR_MAX_CHARS,
    CURSOR_PATTERN,
    MAX_PAGE_ROWS,
    MEASUREMENTS_PATH,
    RELAY_LIMIT,
    MeasurementsPage,
    parse_cursor,
)
from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError, ErrorBody
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import AgreementPeer, SignedPage, Submission

AfterQuery = Annotated[str | None, Query(
    max_length=CURSOR_MAX_CHARS, pattern=CURSOR_PATTERN,
    description="the `next` cursor of the previous page; absent: from the start")]
LimitQuery = Annotated[int, Query(
    ge=1, le=MAX_PAGE_ROWS,
    description="rows wanted (the validator may return fewer: agreement.page_size)")]


def build(deps: ApiDeps) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["agreement"])

    @router.get("/measurements", response_model=MeasurementsPage, responses={
        404: {"model": ErrorBody, "description": "this validator does not serve measurements"}})
    def measurements(request: Request, after: AfterQuery = None,
                     limit: LimitQuery = 100) -> Response:
        if deps.signer is None or not deps.settings.agreement.serve:
            raise ApiError(404, "MEASUREMENTS_OFF", "this validator does not serve its "
                           "measurements (agreement.serve is false, or it has no hotkey)")
        limit = min(limit, deps.settings.agreement.page_size)
        with deps.store.session() as session:
            rows = own_rows(session, after=parse_cursor(after), limit=limit + 1,
                            now=deps.clock())
        page = MeasurementsPage(validator=resolve_signer(deps.signer, role="hotkey").ss58_address,
                                netuid=deps.settings.chain.netuid,
                                scoring_version=SCORING_VERSION,
                                rows=[r.row for r in rows[:limit]],
                                next=next_cursor(rows[:limit], after), more=len(rows) > limit)
        body = page.model_dump_json().encode()
        query = request.scope.get("query_string", b"").decode("latin-1")
        signed = f"{MEASUREMENTS_PATH}?{query}" if query else MEASUREMENTS_PATH
        headers = http_auth.sign(deps.signer, method="GET", path=signed, body=body)
        return Response(body, media_type="application/json", headers=headers)

    @router.get("/relay")
    def relay(after: Annotated[int, Query(ge=0, le=2**62)] = 0,
              limit: Annotated[int, Query(ge=1, le=RELAY_LIMIT)] = RELAY_LIMIT) -> dict:
        """Signed pages of other validators held here with an id above `after` (at most
        `limit`, and about `agreement.max_page_bytes` of bodies); `next` is the id to ask
        after next time."""
        budget = deps.settings.agreement.max_page_bytes
        pages, nxt = [], after
        with deps.store.session() as session:
            for row in session.scalars(select(SignedPage).where(SignedPage.id > after)
                                       .order_by(SignedPage.id).limit(limit)):
                if pages and budget < len(row.body):
                    break
                budget -= len(row.body)
                pages.append(Signed(row.target, dict(row.headers), row.body).to_json())
                nxt = row.id
        return {"pages": pages, "next": nxt}

    nonces = http_auth.InMemoryNonceStore(
        retention=2 * deps.settings.agreement.signature_max_age_s + 5)

    @router.get("/bundles/{digest}", responses={
        403: {"model": ErrorBody, "description": "not signed by a permitted validator"},
        404: {"model": ErrorBody, "description": "no bundle with this digest here"}})
    def bundle(request: Request, digest: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
               ) -> Response:
        """The bundle's wire bytes, for a validator that never received its upload."""
        if deps.hotkey is None:
            raise ApiError(404, "BUNDLES_OFF", "this validator has no hotkey")
        max_age = deps.settings.agreement.signature_max_age_s
        try:
            caller = http_auth.verify(
                dict(request.headers), b"", method="GET", path=request.url.path,
                self_hotkey_ss58=deps.hotkey, max_age=max_age, allowed_skew=max_age,
                nonce_store=nonces, now_ns=int(deps.clock() * 1e9))
        except (http_auth.AuthError, UnicodeEncodeError) as exc:
            raise ApiError(403, "PEER_AUTH", f"bundles are served to validators only: sign "
                           f"the GET for {deps.hotkey} with a permitted validator's hotkey "
                           f"({type(exc).__name__})") from None
        with deps.store.session() as session:
            peer = session.get(AgreementPeer, caller.hotkey_ss58)
            if peer is None or peer.stake <= 0:
                raise ApiError(403, "PEER_AUTH", f"{caller.hotkey_ss58} is not a permitted "
                               "validator of this subnet as this node last saw it")
            wire = session.scalar(select(Submission.bundle).where(Submission.digest == digest))
        if wire is None:
            raise ApiError(404, "NO_BUNDLE", f"no bundle {digest[:16]}… is stored here")
        return Response(wire, media_type="application/octet-stream")

    @router.get("/equivocations")
    def equivocations(one_page: Annotated[bool, Query(
            description="the asker checks one-page proofs (one page given twice, its two "
                        "conflicting rows of one run): without it they are left out")] = False
                      ) -> dict:
        """The proofs in force here (one per excluded validator), newest first and about
        3 x `agreement.max_page_bytes` of encoded pages at most (one always): each is two
        pages one validator signed with different measurements of one run; anyone can
        check them. An expired proof excludes nothing and is not served. A one-page proof
        is served only with `one_page`: a validator older than those proofs refuses it
        (agreement/equivocation.py), so a plain request gets the others alone."""
        with deps.store.session() as session:
            rows = proofs_in_force(session, now=deps.clock(),
                                   max_bytes=3 * deps.settings.agreement.max_page_bytes,
                                   one_pages=one_page)
            return {"proofs": [r.proof for r in rows],
                    "in_force": [{"validator": r.validator, "digest": r.digest,
                                  "until": r.until} for r in rows]}

    return router
