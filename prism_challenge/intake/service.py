"""`Intake`: everything `POST /v1/submissions` does, independent of the web framework.

Order of checks (issue 4): size, freshness, signature, nonce, membership, rate limit,
bundle validity, exact copy / idempotent repeat. Parsing a bundle at the size limits costs
~100 ms of CPU (`ast.parse`), so it is done only for a request that will reach that check:
signed, registered and under its rate limit (a cheap pre-check outside the write lock).
Anyone can make keys; a flood of well-signed requests from unregistered or rate-limited
hotkeys costs a signature check and one indexed count each, and nothing is parsed while
the store's write lock is held except after a lost race.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from sqlalchemy.exc import IntegrityError

from prism_challenge.api.errors import ApiError
from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.intake.admission import admit, recent_submissions
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
        load_bundle = _Once(lambda: Bundle.from_wire(body))
        if self._may_reach_bundle_check(signed.hotkey, now):
            try:
                load_bundle()  # parse now, outside the write transaction
            except BundleError:
                pass  # remembered; admit() raises it at its place in the order
        for attempt in range(2):
            try:
                with self.store.session() as session:
                    return admit(
                        session,
                        signed=signed,
                        load_bundle=load_bundle,
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

    def _may_reach_bundle_check(self, hotkey: str, now: float) -> bool:
        if not self.metagraph.is_registered(hotkey):
            return False
        with self.store.session() as session:
            count, _ = recent_submissions(session, hotkey, self.policy, now)
        return count < self.policy.rate_limit_count


class _Once:
    """Call `fn` at most once; later calls return its result or re-raise its BundleError."""

    def __init__(self, fn: Callable[[], Bundle]) -> None:
        self._fn = fn
        self._result: Bundle | BundleError | None = None

    def __call__(self) -> Bundle:
        if self._result is None:
            try:
                self._result = self._fn()
            except BundleError as exc:
                self._result = exc
        if isinstance(self._result, BundleError):
            raise self._result
        return self._result
