"""Equivocation: one validator signing two different measurements of one run.

An honest validator scores a run once: its bpb, held-out delta, scoring time and stream
parts for a (digest, scoring version) never change. The miner hotkey and corpus do not make
another run: a digest is scored once per store (a score is never overwritten), and when an
earlier committer of the digest takes the run over its row keeps that score; so a row that
moves to another miner keeps every value, and a lie cannot escape by naming another miner.
Only the replay verdict and the eligibility that follows from it change, and only one way:
a run once verified stays verified at the same moment, and a run once ineligible never
becomes eligible again. Two signed pages of one hotkey that disagree on the fixed values,
or whose later signature takes one of those steps back, are therefore a proof that it
served different numbers to different validators (or took back what it published); so is
one signed page holding two such rows of one run (an honest page holds one row a run):
checkable by anyone (agreement/signed.py), stored in `equivocations`, served at
`GET /v1/equivocations`, fetched and checked again by every peer. Every validator holding a
proof leaves that validator out of its electorate until `until` = the later signature's
time + `agreement.equivocation_ban_s`: the same moment everywhere, since both times are
signed. Its stake still counts in the permitted stake, so it weighs like a withholding
validator: the others must pass the quorum without it.

A proof holds two whole signed pages (up to `agreement.max_page_bytes` each), and a liar
can sign pages that conflict on every row. So a validator keeps one proof per validator
while it is in force: the one whose exclusion ends last (a proof that ends later takes the
place of the one held, so every validator comes to hold the same one and ends the exclusion
at the same moment); others are dropped, as is a proof that no longer excludes anything.

A one-page proof (the page given twice) is checked only by validators that read a page's
second row of the digest: a node older than that reads the first row of each copy, finds
them equal, and refuses the proof as `no_conflict`, counting it against the honest peer
that served it every round. So such a proof is served only to an asker that says it checks
them (`GET /v1/equivocations?one_page=true`, which this node sends); any other asker gets
the two-page proofs alone. A node older than one-page proofs cannot be brought to exclude
on one (no form of one signed page makes its first rows differ): it counts the liar until
it runs this code, as it did before.
"""

from __future__ import annotations

import time
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from prism_challenge.agreement.signed import PageInvalid, Signed, check
from prism_challenge.storage.tables import Equivocation


class Measured(Protocol):
    bpb: float
    heldout_delta: float
    measured_at: float
    stream_parts: list[float] | None
    eligible: bool
    verified: bool
    verified_at: float | None
    scoring_version: str


def same_run(a: Measured, b: Measured) -> bool:
    """Two rows of one digest are one measurement when signed under the same scoring
    version, whatever miner or corpus they name (see the module's docstring)."""
    return a.scoring_version == b.scoring_version


def _fixed(m: Measured) -> tuple:
    return m.bpb, m.heldout_delta, m.measured_at, m.stream_parts


def conflicting(earlier: Measured, later: Measured) -> bool:
    """Two measurements of one run by one validator, in the order it signed them, that an
    honest one never signs: a different bpb, held-out delta, scoring time or stream parts;
    a verified run unverified later or verified at another moment; an ineligible run made
    eligible again."""
    return (_fixed(earlier) != _fixed(later)
            or (earlier.verified and (not later.verified
                                      or earlier.verified_at != later.verified_at))
            or (not earlier.eligible and later.eligible))


def conflicting_pages(a: tuple[Signed, Measured], b: tuple[Signed, Measured]) -> bool:
    """`conflicting` on two signed rows in their signing order (both orders when signed at
    the same nanosecond, which an honest validator never does with different rows)."""
    (sa, ma), (sb, mb) = a, b
    if sa.signed_ns == sb.signed_ns:
        return conflicting(ma, mb) or conflicting(mb, ma)
    return conflicting(ma, mb) if sa.signed_ns < sb.signed_ns else conflicting(mb, ma)


def banned_until(signed_ns: int, ban_s: float) -> float:
    """When a proof whose later page was signed at `signed_ns` stops excluding."""
    return signed_ns / 1e9 + ban_s


def excluded(session: Session, *, now: float | None = None) -> set[str]:
    """Validators with a proof in force: left out of the electorate."""
    now = time.time() if now is None else now
    return set(session.scalars(select(Equivocation.validator).where(Equivocation.until > now)))


def proof(validator: str, digest: str, first: Signed, second: Signed) -> dict:
    return {"validator": validator, "digest": digest,
            "pages": [first.to_json(), second.to_json()]}


def check_proof(data: object, *, netuid: int, own_hotkey: str, now_ns: int, skew_s: float,
                max_bytes: int) -> tuple[str, str, Signed, Signed]:
    """(validator, digest, first, second) of a proof that checks out: two pages both
    signed by `validator`, each with a row for `digest` (its first) of the same scoring
    version, that conflict, whatever miner or corpus each names; or one page given twice,
    whose first and second rows for `digest` conflict (an honest page holds one row per
    digest). Raises PageInvalid otherwise."""
    if not isinstance(data, dict) or set(data) != {"validator", "digest", "pages"} or not (
            isinstance(data["pages"], list) and len(data["pages"]) == 2):
        raise PageInvalid("malformed", "a proof is {validator, digest, pages: [two pages]}")
    validator, digest = data["validator"], data["digest"]
    signed = [Signed.from_json(p, max_bytes=max_bytes) for p in data["pages"]]
    one_page = signed[0] == signed[1]
    rows = []
    for n, s in enumerate(signed):
        page = check(s, netuid=netuid, own_hotkey=own_hotkey, now_ns=now_ns, skew_s=skew_s)
        if page.validator != validator:
            raise PageInvalid("wrong_validator", f"a proof against {validator!r} holds a page "
                              f"of {page.validator}")
        found = [r for r in page.rows if r.digest == digest]
        if not found:
            raise PageInvalid("malformed", f"a page of the proof has no row for {digest!r}")
        # one page given twice: its first and its second row of the digest
        rows.append(found[min(n, len(found) - 1)] if one_page else found[0])
    a, b = rows
    if not same_run(a, b) or not conflicting_pages((signed[0], a), (signed[1], b)):
        raise PageInvalid("no_conflict", f"the two pages agree on {digest[:16]}: no proof")
    return validator, digest, signed[0], signed[1]


def record(session: Session, validator: str, digest: str, first: Signed, second: Signed, *,
           ban_s: float, now: float) -> bool:
    """Store a checked proof; True when it is new here. Nothing is stored for a run already
    proven, for a proof no longer in force at `now`, or while a proof of this validator
    that ends no earlier is in force; a proof ending later replaces the one in force."""
    if session.scalar(select(Equivocation.id).where(
            Equivocation.validator == validator, Equivocation.digest == digest)) is not None:
        return False
    later = max(first.signed_ns, second.signed_ns)
    until = banned_until(later, ban_s)
    if until <= now:
        return False
    held = session.scalars(select(Equivocation).where(
        Equivocation.validator == validator, Equivocation.until > now)
        .order_by(Equivocation.until.desc())).first()
    if held is not None and held.until >= until:
        return False
    if held is None:
        held = Equivocation(validator=validator)
        session.add(held)
    held.digest, held.proof = digest, proof(validator, digest, first, second)
    held.signed_ns, held.until, held.found_at = later, until, now
    session.flush()
    return True


def one_page(data: dict) -> bool:
    """Whether a stored proof is one page given twice (two conflicting rows of one run in
    one page): only validators that read a page's second row of a digest can check it."""
    pages = data.get("pages")
    return isinstance(pages, list) and len(pages) == 2 and pages[0] == pages[1]


def proofs_in_force(session: Session, *, now: float, max_bytes: int,
                    one_pages: bool = True) -> list[Equivocation]:
    """The proofs in force at `now`, newest found first, as many as fit in `max_bytes` of
    encoded pages (at least one): what `GET /v1/equivocations` serves. Without
    `one_pages`, one-page proofs are left out (the asker may not check them)."""
    out: list[Equivocation] = []
    for row in session.scalars(select(Equivocation).where(Equivocation.until > now)
                               .order_by(Equivocation.found_at.desc(), Equivocation.id.desc())):
        if not one_pages and one_page(row.proof):
            continue
        size = sum(len(page.get("body", "")) for page in row.proof.get("pages", []))
        if out and size > max_bytes:
            break
        max_bytes -= size
        out.append(row)
    return out
