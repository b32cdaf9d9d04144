"""The store-side checks of a signed submission and the write that accepts it.

Runs inside one transaction (SQLite takes the write lock at BEGIN; on PostgreSQL the
transaction first takes an advisory lock on the hotkey), so the nonce check, the rate-limit
count, the copy check and the insert see one consistent state and a refusal rolls
everything back: a refused request leaves no row, not even its nonce. Nonces are
stored only for requests that were accepted or answered as idempotent repeats; a refused
request replayed inside the window is refused again for the same reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from prism_challenge.api.errors import ApiError
from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.intake.schemas import Receipt
from prism_challenge.intake.signing import SignedHeaders
from prism_challenge.storage import Status, serialize_on
from prism_challenge.storage.tables import Nonce, Submission


def _receipt(row: Submission, *, idempotent: bool) -> Receipt:
    return Receipt(
        id=row.id,
        digest=row.digest,
        hotkey=row.hotkey,
        status=row.status,
        accepted_at=row.accepted_at,
        block=row.block,
        idempotent=idempotent,
    )


def _check_nonce(session: Session, signed: SignedHeaders) -> None:
    seen = session.scalar(
        select(Nonce.id).where(Nonce.hotkey == signed.hotkey, Nonce.nonce == signed.nonce)
    )
    if seen is not None:
        raise ApiError(
            409, "NONCE_REPLAY", f"nonce {signed.nonce} was already used by {signed.hotkey}"
        )


def recent_submissions(
    session: Session, hotkey: str, policy: IntakePolicy, now: float
) -> tuple[int, float | None]:
    """How many submissions `hotkey` had accepted inside the rate window, and the oldest time."""
    since = now - policy.rate_limit_window_s
    count, oldest = session.execute(
        select(func.count(Submission.id), func.min(Submission.accepted_at)).where(
            Submission.hotkey == hotkey, Submission.accepted_at > since
        )
    ).one()
    return count, oldest


def _check_rate(session: Session, hotkey: str, policy: IntakePolicy, now: float) -> None:
    count, oldest = recent_submissions(session, hotkey, policy, now)
    if count >= policy.rate_limit_count:
        retry_after = max(1, math.ceil(oldest + policy.rate_limit_window_s - now))
        raise ApiError(
            429,
            "RATE_LIMIT",
            f"{hotkey} already has {count} submissions in the last "
            f"{policy.rate_limit_window_s:.0f} s (limit {policy.rate_limit_count}); "
            f"retry in {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )


def admit(
    session: Session,
    *,
    signed: SignedHeaders,
    load_bundle: Callable[[], Bundle],
    metagraph: MetagraphView,
    policy: IntakePolicy,
    now: float,
) -> Receipt:
    """Nonce, membership, rate limit, bundle, copy / repeat, then insert (in that order)."""
    # Another admission of this hotkey waits here until this one commits, so it counts our row.
    serialize_on(session, f"intake:{signed.hotkey}")
    session.execute(delete(Nonce).where(Nonce.seen_at < now - policy.nonce_ttl_s))
    _check_nonce(session, signed)
    if not metagraph.is_registered(signed.hotkey):
        raise ApiError(
            403, "NOT_REGISTERED", f"{signed.hotkey} is not registered on netuid {policy.netuid}"
        )
    _check_rate(session, signed.hotkey, policy, now)
    try:
        bundle = load_bundle()
    except BundleError as exc:
        where = f" ({exc.file})" if exc.file else ""
        raise ApiError(422, exc.rule, f"bundle refused{where}: {exc}") from None
    original = session.scalar(select(Submission).where(Submission.digest == bundle.digest))
    if original is not None and original.hotkey != signed.hotkey:
        raise ApiError(
            409,
            "DUPLICATE",
            f"this bundle is an exact copy of submission {original.id}, accepted at "
            f"{original.accepted_at:.0f} from another hotkey; the original keeps precedence",
        )
    session.add(Nonce(hotkey=signed.hotkey, nonce=signed.nonce, seen_at=now))
    if original is not None:
        return _receipt(original, idempotent=True)
    row = Submission(
        digest=bundle.digest,
        hotkey=signed.hotkey,
        status=Status.RECEIVED.value,
        reason=None,
        attempts=0,
        accepted_at=now,
        block=metagraph.block,
        updated_at=now,
        not_before=0.0,
        name=bundle.meta.name,
        bundle=bundle.to_wire(),
    )
    session.add(row)
    session.flush()
    return _receipt(row, idempotent=False)
