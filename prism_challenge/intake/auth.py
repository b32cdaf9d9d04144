"""Who sent this request, to whom, and is it recent and unaltered: `http_auth.verify`.

Pure checks run before anything is parsed or written. Each failure becomes a clear refusal
whose rule tells the miner what to fix (their clock, the validator they signed for, their
key). A replay is refused here too, against the nonces stored for accepted requests; the
accepting transaction checks again, so a concurrent replay cannot slip between the two.
"""

from __future__ import annotations

from collections.abc import Mapping

from bittensor import http_auth
from sqlalchemy import select

from prism_challenge.api.errors import ApiError
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.storage import Store
from prism_challenge.storage.tables import Nonce


class StoredNonces:
    """`http_auth`'s replay check against the store's nonces.

    It only reads: a nonce is written with the submission it carried, in the transaction
    that accepts it, so a refused request never leaves a nonce behind.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def check_and_store(self, hotkey_ss58: str, nonce_ns: int) -> bool:
        with self.store.session() as session:
            seen = session.scalar(select(Nonce.id).where(
                Nonce.hotkey == hotkey_ss58, Nonce.nonce == str(nonce_ns)))
        return seen is None


_REFUSALS: list[tuple[type[http_auth.AuthError], int, str, str]] = [
    (http_auth.MalformedAuth, 401, "AUTH_HEADERS", ""),
    (http_auth.WrongReceiver, 401, "RECEIVER",
     " (sign for this validator's hotkey, shown at /v1/health)"),
    (http_auth.StaleRequest, 401, "STALE",
     " (check your system clock and sign just before sending)"),
    (http_auth.BadSignature, 401, "SIGNATURE",
     " (the method, path, body, nonce and receiver are all signed)"),
    (http_auth.ReplayedRequest, 409, "NONCE_REPLAY", ""),
]


def authenticate(headers: Mapping[str, str], body: bytes, *, target: str, receiver: str,
                 policy: IntakePolicy, nonces: StoredNonces, now: float) -> http_auth.Caller:
    """The verified sender of a POST to `target` (path and query as received)."""
    try:
        return http_auth.verify(
            headers, body, method="POST", path=target, self_hotkey_ss58=receiver,
            max_age=policy.freshness_s, allowed_skew=policy.freshness_s, nonce_store=nonces,
            now_ns=int(now * 1e9))
    except http_auth.AuthError as exc:
        for kind, status, rule, hint in _REFUSALS:
            if isinstance(exc, kind):
                raise ApiError(status, rule, f"{exc}{hint}") from None
        raise ApiError(401, "AUTH_HEADERS", str(exc)) from None
    except UnicodeEncodeError:  # a lone surrogate: text no client could have signed
        raise ApiError(401, "AUTH_HEADERS", "an auth header or the request target is not "
                       "valid text (it cannot be encoded as UTF-8)") from None
