"""`Intake`: everything `POST /v1/submissions` does, independent of the web framework.

Order of checks: size, signature (headers, receiver, freshness, signature, replay), nonce,
membership, rate limit, bundle validity, commitment, exact copy / idempotent repeat.
Parsing a bundle at the size limits costs ~100 ms of CPU (`ast.parse`) and waiting for a
commitment holds a request open, so both are done only for a request that will reach
those checks: signed, registered and under its rate limit (a cheap pre-check outside the
write lock). Anyone can make keys; a flood of well-signed requests from unregistered or
rate-limited hotkeys costs a signature check and one indexed count each. A registered
hotkey may have one upload waiting for its commitment at a time, so it cannot tie up the
server's threads either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from sqlalchemy.exc import IntegrityError

from prism_challenge.api.errors import ApiError
from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.chain.subnet import Commitment, Subnet, commitment_value
from prism_challenge.chain.subtensor import ChainUnavailable
from prism_challenge.intake.admission import admit, recent_submissions
from prism_challenge.intake.auth import StoredNonces, authenticate
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
        *,
        hotkey: str | None = None,
        subnet: Subnet | None = None,
        settle_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.metagraph = metagraph
        self.policy = policy
        self.clock = clock
        self.hotkey = hotkey  # this validator's: the receiver every request must be signed for
        self.subnet = subnet
        self.settle_s = settle_s
        self.sleep = sleep
        self.nonces = StoredNonces(store)
        self._waiting: set[str] = set()
        self._waiting_lock = threading.Lock()

    def submit(self, headers: Mapping[str, str], body: bytes, target: str) -> Receipt:
        """Admit the body of a POST to `target` (the path and query as received)."""
        now = self.clock()
        if len(body) > self.policy.max_body_bytes:
            raise ApiError(
                413,
                "BODY_SIZE",
                f"the request body is over the limit of {self.policy.max_body_bytes} bytes",
            )
        if self.hotkey is None or self.subnet is None:
            raise ApiError(503, "NOT_READY", "this validator has no hotkey or no commitment "
                           "source configured, so it cannot take submissions")
        caller = authenticate(headers, body, target=target, receiver=self.hotkey,
                              policy=self.policy, nonces=self.nonces, now=now)
        load_bundle = _Once(lambda: Bundle.from_wire(body))
        commitment = None
        try:
            if self._may_reach_bundle_check(caller.hotkey_ss58, now):
                try:
                    bundle = load_bundle()  # parse now, outside the write transaction
                except BundleError:
                    bundle = None  # remembered; admit() raises it at its place in the order
                if bundle is not None:
                    commitment = self._await_commitment(caller.hotkey_ss58, bundle.digest)
        except ChainUnavailable as exc:
            raise ApiError(503, "CHAIN_UNAVAILABLE", f"cannot check this upload: {exc}",
                           headers={"Retry-After": "30"}) from None
        for attempt in range(2):
            try:
                with self.store.session() as session:
                    return admit(
                        session,
                        caller=caller,
                        load_bundle=load_bundle,
                        commitment=commitment,
                        metagraph=self.metagraph,
                        policy=self.policy,
                        now=now,
                        settle_s=self.settle_s,
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

    def _await_commitment(self, hotkey: str, digest: str) -> Commitment | None:
        """The hotkey's commitment once it names this bundle, polling up to
        `commitment_wait_s` (uploads may outrun the chain); else the latest one seen."""
        expected = commitment_value(hotkey, digest)
        seen = self.subnet.latest_commitment(hotkey)
        if (seen is not None and seen.value == expected) or self.policy.commitment_wait_s <= 0:
            return seen
        with self._waiting_lock:
            if hotkey in self._waiting:
                raise ApiError(429, "COMMITMENT_WAIT", f"an upload from {hotkey} is already "
                               "waiting for its commitment; retry when it is answered",
                               headers={"Retry-After": str(int(self.policy.commitment_wait_s))})
            self._waiting.add(hotkey)
        try:
            deadline = time.monotonic() + self.policy.commitment_wait_s
            while (left := deadline - time.monotonic()) > 0:
                self.sleep(min(self.policy.commitment_poll_s, left))
                seen = self.subnet.latest_commitment(hotkey)
                if seen is not None and seen.value == expected:
                    break
            return seen
        finally:
            with self._waiting_lock:
                self._waiting.discard(hotkey)


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
