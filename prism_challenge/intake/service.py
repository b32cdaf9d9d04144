"""`Intake`: everything `POST /v1/submissions` does, independent of the web framework.

Order of checks (issue 4): size, freshness, signature, nonce, membership, rate limit,
bundle validity, exact copy / idempotent repeat. The bundle is parsed after the signature
holds but outside the store transaction, so no CPU work happens under the write lock and
none at all for unauthenticated requests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from sqlalchemy.exc import IntegrityError

from prism_challenge.api.errors import ApiError
from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.intake.admission import admit
from prism_challenge.intake.auth import authenticate
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.intake.schemas import Receipt
from prism_challenge.storage import Store


class Intake:
    def __init__(
        self,
        store: Store,
        metagraph: MetagraphView,
        policy: IntakePolicy,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.metagraph = metagraph
        self.policy = policy
        self.clock = clock

    def submit(self, headers: Mapping[str, str], body: bytes) -> Receipt:
        now = self.clock()
        if len(body) > self.policy.max_body_bytes:
            raise ApiError(
                413,
                "BODY_SIZE",
                f"the request body is over the limit of {self.policy.max_body_bytes} bytes",
            )
        signed = authenticate(headers, body, self.policy, now)
        try:
            bundle: Bundle | BundleError = Bundle.from_wire(body)
        except BundleError as exc:
            bundle = exc
        for attempt in range(2):
            try:
                with self.store.session() as session:
                    return admit(
                        session,
                        signed=signed,
                        bundle=bundle,
                        metagraph=self.metagraph,
                        policy=self.policy,
                        now=now,
                    )
            except IntegrityError:
                # A concurrent request won a race a database without SQLite's up-front write
                # lock lets through (same nonce or same digest); re-run to see its rows.
                if attempt:
                    raise
        raise AssertionError("unreachable")
