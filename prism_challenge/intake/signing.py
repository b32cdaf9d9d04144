"""Signed submissions: bittensor's `http_auth` (the `btauth/1` protocol), used by both sides.

The miner's hotkey signs (sr25519) the method, the request path as sent, sha256 of the
body, a nanosecond-timestamp nonce, its own hotkey and the receiving validator's hotkey.
So a signature made for one validator is refused by every other one (`RECEIVER`), and a
captured upload cannot be replayed or altered. The headers are bittensor's
`X-Bittensor-*`; any language that implements btauth/1 can submit.
"""

from __future__ import annotations

from typing import Any

from bittensor import http_auth

SUBMISSIONS_PATH = "/v1/submissions"
HEADERS = (
    http_auth.HEADER_VERSION,
    http_auth.HEADER_HOTKEY,
    http_auth.HEADER_RECEIVER,
    http_auth.HEADER_NONCE,
    http_auth.HEADER_SIGNATURE,
)


def sign_submission(signer: Any, body: bytes, *, receiver: str, path: str = SUBMISSIONS_PATH,
                    nonce_ns: int | None = None) -> dict[str, str]:
    """The auth headers for POSTing `body` to `path` of the validator whose hotkey is
    `receiver`; `signer` is a bittensor wallet or keypair (its hotkey signs)."""
    return http_auth.sign(signer, method="POST", path=path, body=body, receiver_ss58=receiver,
                          nonce_ns=nonce_ns)
