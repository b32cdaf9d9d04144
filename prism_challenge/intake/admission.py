"""The store-side checks of a signed submission and the write that accepts it.

Runs inside one transaction (SQLite takes the write lock at BEGIN; on PostgreSQL the
transaction first takes an advisory lock on the hotkey), so the nonce check, the rate-limit
count, the copy check and the insert see one consistent state and a refusal rolls
everything back: a refused request leaves no row, not even its nonce. Nonces are
stored only for requests that were accepted or answered as idempotent repeats; a refused
request replayed inside the window is refused again for the same reason.

A bundle is accepted only when its digest is what the hotkey's latest commitment names;
the commitment's block (then the hotkey's uid) is the bundle's precedence, the same on
every validator. An exact copy already stored for another hotkey keeps its row unless the
incoming commitment is earlier: then the row passes to the earlier committer, so the
order in which uploads happen to reach this validator decides nothing. The same bundle
uploaded again by its own hotkey is an idempotent repeat, except after a failure on the
validator's side (infrastructure): then it is queued again with fresh attempts.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from bittensor.http_auth import Caller
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from prism_challenge.api.errors import ApiError
from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.chain.precedence import precedence
from prism_challenge.chain.subnet import Commitment, commitment_value
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.intake.schemas import Receipt
from prism_challenge.storage import Status, failed_for_infra, reopen_after_infra, serialize_on
from prism_challenge.storage.tables import BundleFingerprint, Nonce, Submission


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


def _check_nonce(session: Session, caller: Caller) -> None:
    seen = session.scalar(select(Nonce.id).where(
        Nonce.hotkey == caller.hotkey_ss58, Nonce.nonce == str(caller.nonce_ns)))
    if seen is not None:
        raise ApiError(409, "NONCE_REPLAY",
                       f"nonce {caller.nonce_ns} was already used by {caller.hotkey_ss58}")


def _check_commitment(commitment: Commitment | None, hotkey: str, digest: str,
                      policy: IntakePolicy) -> Commitment:
    expected = commitment_value(hotkey, digest)
    if commitment is None:
        raise ApiError(
            409, "COMMITMENT_MISSING",
            f"no commitment from {hotkey} appeared on netuid {policy.netuid} within "
            f"{policy.commitment_wait_s:g} s; commit {expected} (prism submit does it) and "
            "upload again")
    if commitment.value != expected:
        raise ApiError(
            409, "COMMITMENT_MISMATCH",
            f"the latest commitment of {hotkey} (block {commitment.block}) names another "
            f"bundle; this bundle ({digest[:16]}) needs the commitment {expected}")
    return commitment


def _take_over(session: Session, row: Submission, commitment: Commitment) -> None:
    """An exact copy of a bundle committed earlier: the row now belongs to the committer."""
    session.execute(update(BundleFingerprint)
                    .where(BundleFingerprint.submission_id == row.id)
                    .values(hotkey=commitment.hotkey))
    row.hotkey, row.block, row.uid = commitment.hotkey, commitment.block, commitment.uid


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
    caller: Caller,
    load_bundle: Callable[[], Bundle],
    commitment: Commitment | None,
    metagraph: MetagraphView,
    policy: IntakePolicy,
    now: float,
    settle_s: float = 0.0,
) -> Receipt:
    """Nonce, membership, rate limit, bundle, commitment, copy / repeat, then insert."""
    hotkey = caller.hotkey_ss58
    # Another admission of this hotkey waits here until this one commits, so it counts our row.
    serialize_on(session, f"intake:{hotkey}")
    session.execute(delete(Nonce).where(Nonce.seen_at < now - policy.nonce_ttl_s))
    _check_nonce(session, caller)
    if not metagraph.is_registered(hotkey):
        raise ApiError(403, "NOT_REGISTERED",
                       f"{hotkey} is not registered on netuid {policy.netuid}")
    _check_rate(session, hotkey, policy, now)
    try:
        bundle = load_bundle()
    except BundleError as exc:
        where = f" ({exc.file})" if exc.file else ""
        raise ApiError(422, exc.rule, f"bundle refused{where}: {exc}") from None
    commitment = _check_commitment(commitment, hotkey, bundle.digest, policy)
    uid = commitment.uid if commitment.uid is not None else metagraph.uid_of(hotkey)
    commitment = Commitment(hotkey, commitment.value, commitment.block, uid)
    original = session.scalar(select(Submission).where(Submission.digest == bundle.digest))
    if original is not None and original.hotkey != hotkey:
        if precedence(commitment.block, uid) >= precedence(original.block, original.uid):
            raise ApiError(
                409, "DUPLICATE",
                f"this bundle is an exact copy of submission {original.id}, committed at "
                f"block {original.block} by another hotkey; the original keeps precedence")
        _take_over(session, original, commitment)
        session.add(Nonce(hotkey=hotkey, nonce=str(caller.nonce_ns), seen_at=now))
        return _receipt(original, idempotent=False)
    session.add(Nonce(hotkey=hotkey, nonce=str(caller.nonce_ns), seen_at=now))
    if original is not None and failed_for_infra(original):
        # It failed on this validator's side: the miner's new upload queues it again.
        return _receipt(reopen_after_infra(session, original, now=now), idempotent=False)
    if original is not None:
        return _receipt(original, idempotent=True)
    row = Submission(
        digest=bundle.digest,
        hotkey=hotkey,
        status=Status.RECEIVED.value,
        reason=None,
        attempts=0,
        accepted_at=now,
        block=commitment.block,
        uid=uid,
        updated_at=now,
        not_before=now + settle_s,
        name=bundle.meta.name,
        bundle=bundle.to_wire(),
    )
    session.add(row)
    session.flush()
    return _receipt(row, idempotent=False)


def precedes_holder(session: Session, digest: str, commitment: Commitment,
                    metagraph: MetagraphView) -> bool | None:
    """Whether `commitment` (a hotkey's claim of `digest`) comes before the committer this
    validator holds the bundle for; None when it holds none. Its uid is the commitment's,
    else the metagraph's."""
    original = session.scalar(select(Submission).where(Submission.digest == digest))
    if original is None:
        return None
    uid = commitment.uid if commitment.uid is not None else metagraph.uid_of(commitment.hotkey)
    return precedence(commitment.block, uid) < precedence(original.block, original.uid)


def admit_from_peer(session: Session, *, hotkey: str, bundle: Bundle,
                    commitment: Commitment | None,
                    metagraph: MetagraphView, policy: IntakePolicy, now: float,
                    settle_s: float = 0.0) -> Submission | None:
    """Accept a bundle fetched from a peer validator (a run peers measured that never
    reached this one) under the checks the miner's own upload gets after its signature:
    the miner is registered and its latest commitment names exactly this bundle. Returns
    the new row; the row held here when the same bundle was stored for another hotkey that
    committed it later (it passes to this earlier committer, as on an upload); None when
    this validator already holds it for this hotkey or an earlier committer. Raises ApiError
    (the same rules as an upload) when a check fails."""
    serialize_on(session, f"intake:{hotkey}")
    if not metagraph.is_registered(hotkey):
        raise ApiError(403, "NOT_REGISTERED",
                       f"{hotkey} is not registered on netuid {policy.netuid}")
    commitment = _check_commitment(commitment, hotkey, bundle.digest, policy)
    uid = commitment.uid if commitment.uid is not None else metagraph.uid_of(hotkey)
    original = session.scalar(select(Submission).where(Submission.digest == bundle.digest))
    if original is not None:
        if original.hotkey == hotkey or precedence(commitment.block, uid) >= precedence(
                original.block, original.uid):
            return None
        _take_over(session, original, Commitment(hotkey, commitment.value, commitment.block,
                                                 uid))
        return original
    row = Submission(digest=bundle.digest, hotkey=hotkey, status=Status.RECEIVED.value,
                     reason=None, attempts=0, accepted_at=now, block=commitment.block, uid=uid,
                     updated_at=now, not_before=now + settle_s, name=bundle.meta.name,
                     bundle=bundle.to_wire())
    session.add(row)
    session.flush()
    return row
