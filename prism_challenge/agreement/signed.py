"""A measurements page as its author signed it: checkable by anyone, at any later time.

The `btauth/1` signature covers the method (GET), the request target, sha256 of the body
bytes, the timestamp and the signer, and binds no receiver. So the triple (target, headers,
body) a validator received is proof, to every other validator, that its author served that
page: it can be relayed (`GET /v1/relay`) and two conflicting ones are an equivocation.

A relayed page is checked like a fetched one (signature, signer, shape, netuid, no more
rows than its request target asked for) except
for freshness: it may be old, and replay is harmless (storing a page again changes nothing;
an older page never replaces a newer one). A timestamp in the future beyond the allowed
skew is still refused, so a page cannot be dated to outrank pages not yet signed.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from bittensor import http_auth
from pydantic import ValidationError

from prism_challenge.agreement.wire import MEASUREMENTS_PATH, MeasurementsPage, asked_limit

NONCE_HEADER = http_auth.HEADER_NONCE.lower()
MAX_TARGET_CHARS = 200
_FOREVER_S = 1e10  # no lower bound on a relayed page's age


def nonce_of(headers: dict[str, str]) -> int | None:
    """The signing time (ns) a page's nonce header states, if it is written the one way it
    can be: plain ASCII digits, no sign, space, underscore or leading zero. The signature
    covers the integer `int()` reads, and `int()` also reads `+123`, ` 123` or `1_23`: a
    page re-sent under such a header still verifies, so its author's time order would be
    whatever the reader's parser makes of it (two of an honest validator's pages could be
    put in the wrong order and shown as a verdict it took back). A page in any other form
    is refused wherever it arrives (`check`, and a fetched page in fetch.py)."""
    value = headers.get(NONCE_HEADER)
    if value is None or not (value.isascii() and value.isdigit()) or str(int(value)) != value:
        return None
    return int(value)


class PageInvalid(Exception):
    """A signed page (relayed, or inside a proof) that does not check out."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class Signed:
    """One page exactly as signed: the request target, the `X-Bittensor-*` headers, the
    body bytes."""

    target: str
    headers: dict[str, str]
    body: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()

    @property
    def signed_ns(self) -> int:
        value = nonce_of(self.headers)
        return -1 if value is None else value

    def to_json(self) -> dict:
        return {"target": self.target, "headers": self.headers,
                "body": base64.b64encode(self.body).decode()}

    @classmethod
    def from_json(cls, data: object, *, max_bytes: int) -> Signed:
        """Raises PageInvalid("malformed") on anything but a well-shaped, bounded object."""
        if not isinstance(data, dict) or set(data) != {"target", "headers", "body"}:
            raise PageInvalid("malformed", "a signed page is {target, headers, body}")
        target, headers, body = data["target"], data["headers"], data["body"]
        if not (isinstance(target, str) and target.startswith(MEASUREMENTS_PATH)
                and len(target) <= MAX_TARGET_CHARS):
            raise PageInvalid("malformed", f"a signed page's target is {MEASUREMENTS_PATH}?…")
        if not (isinstance(headers, dict) and len(headers) <= 16 and all(
                isinstance(k, str) and isinstance(v, str) and len(k) + len(v) <= 512
                for k, v in headers.items())):
            raise PageInvalid("malformed", "a signed page's headers are up to 16 short strings")
        if not isinstance(body, str) or len(body) > (max_bytes * 4) // 3 + 4:
            raise PageInvalid("oversized", f"a signed page of more than {max_bytes} bytes")
        try:
            raw = base64.b64decode(body, validate=True)
        except ValueError:
            raise PageInvalid("malformed", "a signed page's body is not base64") from None
        return cls(target, {k.lower(): v for k, v in headers.items()}, raw)


class _NoReplayCheck:
    """A relayed page may arrive many times (from every peer): storing it again changes
    nothing, so its nonce is not remembered."""

    retention = None

    def check_and_store(self, sender: str, nonce: int) -> bool:
        return True


def signed_headers(headers: dict[str, str]) -> dict[str, str]:
    """The `X-Bittensor-*` headers of a response (lower-cased), all a proof needs."""
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-bittensor-")}


def check(signed: Signed, *, netuid: int, own_hotkey: str, now_ns: int,
          skew_s: float) -> MeasurementsPage:
    """The page, once its signature verifies (whatever its age, at most `skew_s` ahead of
    `now_ns`) and it is a well-formed page of its signer on `netuid`; else PageInvalid."""
    try:
        caller = http_auth.verify(
            signed.headers, signed.body, method="GET", path=signed.target,
            self_hotkey_ss58=own_hotkey, max_age=_FOREVER_S, allowed_skew=skew_s,
            require_receiver=False, nonce_store=_NoReplayCheck(), now_ns=now_ns)
    except http_auth.AuthError as exc:
        raise PageInvalid("signature", f"the page's signature was refused: "
                          f"{type(exc).__name__}: {exc}") from None
    except UnicodeEncodeError:
        raise PageInvalid("signature", "unreadable signature headers") from None
    if nonce_of(signed.headers) is None:
        raise PageInvalid("signature", "the page's nonce header is not a plain decimal "
                          "integer (the form its author's node writes)")
    try:
        page = MeasurementsPage.model_validate_json(signed.body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise PageInvalid("malformed", f"not a measurements page ({where}: "
                          f"{first.get('msg')})") from None
    if page.validator != caller.hotkey_ss58 or page.netuid != netuid:
        raise PageInvalid("wrong_validator", f"a page of {page.validator} on netuid "
                          f"{page.netuid} signed by {caller.hotkey_ss58}, on netuid {netuid}")
    if len(page.rows) > asked_limit(signed.target):
        raise PageInvalid("too_many_rows", f"a page of {len(page.rows)} rows signed for "
                          f"{signed.target}: more than were asked")
    return page
