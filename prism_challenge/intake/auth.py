"""Who sent this request, and is it theirs and recent: headers, freshness, signature.

Pure checks with no store access, run before anything is parsed or written; every failure
is a 401 whose rule tells the miner what to fix (their clock, their netuid, their key).
"""

from __future__ import annotations

from collections.abc import Mapping

from prism_challenge.api.errors import ApiError
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.intake.signing import MalformedHeaders, SignedHeaders, verify_signature


def authenticate(
    headers: Mapping[str, str], body: bytes, policy: IntakePolicy, now: float
) -> SignedHeaders:
    try:
        signed = SignedHeaders.parse(headers)
    except MalformedHeaders as exc:
        raise ApiError(401, "AUTH_HEADERS", str(exc)) from None
    skew = now - signed.timestamp
    if abs(skew) > policy.freshness_s:
        raise ApiError(
            401,
            "STALE",
            f"the request was signed {abs(skew):.0f} s in the {'past' if skew > 0 else 'future'}"
            f" of this validator's clock; at most {policy.freshness_s:.0f} s are accepted "
            "(check your system clock and sign just before sending)",
        )
    if signed.netuid != policy.netuid:
        raise ApiError(
            401,
            "NETUID",
            f"the request is signed for netuid {signed.netuid}; this validator serves "
            f"netuid {policy.netuid}",
        )
    if not verify_signature(signed.hotkey, signed.message(body), signed.signature):
        raise ApiError(
            401,
            "SIGNATURE",
            f"the signature is not a valid sr25519 signature by {signed.hotkey} of this "
            "request (body, nonce, timestamp and netuid are all signed)",
        )
    return signed
