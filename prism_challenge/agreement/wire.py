"""What one validator serves another: a page of its measurements, signed by its hotkey.

The page is plain JSON; the proof of origin is bittensor's `btauth/1` headers on the
*response*: the serving hotkey signs the method, the request target (path and query, so a
page cannot be passed off as the answer to another query), sha256 of the exact body bytes
and a nanosecond timestamp (so an old page cannot be replayed past `signature_max_age_s`).
No receiver is bound: measurements are public, any peer may ask. Every field is bounded, so
a page that parses is a page that can be stored.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MEASUREMENTS_PATH = "/v1/measurements"
RELAY_PATH = "/v1/relay"  # the signed pages a validator holds of others
EQUIVOCATIONS_PATH = "/v1/equivocations"  # its proofs of equivocation
# what a validator that checks one-page proofs asks (older validators are not served them)
EQUIVOCATIONS_QUERY = "one_page=true"
RELAY_LIMIT = 50  # pages per relay answer
MAX_PAGE_ROWS = 1000
MAX_STREAM_PARTS = 1024  # the most stretches `scoring.dethrone_windows` allows
CURSOR_PATTERN = r"^[0-9]{1,20}:[0-9]{1,10}$"
CURSOR_MAX_CHARS = 32

Hotkey = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[1-9A-HJ-NP-Za-km-z]+$")]
Score = Annotated[float, Field(ge=-1e6, le=1e6, allow_inf_nan=False)]
Time = Annotated[float, Field(ge=0, le=1e11, allow_inf_nan=False)]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MeasurementRow(_Wire):
    """One scored run as the serving validator measured it."""

    miner_hotkey: Hotkey
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    block: int | None = Field(None, ge=0, le=2**31 - 1)  # of the miner's commitment
    bpb: Score
    heldout_delta: Score
    eligible: bool  # eligible with a full score (not stopped early, replay not failed)
    verified: bool  # its contender replay passed on the serving validator
    measured_at: Time  # when the serving validator scored it (its clock, seconds)
    verified_at: Time | None = None
    corpus: str = Field(min_length=1, max_length=32)
    scoring_version: str = Field(min_length=5, max_length=16, pattern=r"^\d+\.\d+\.\d+$")
    # the run's bpb over equal stretches of the stream (what the dethrone rule's noise term
    # pairs between two runs): every validator then ranks with the same noise, not only
    # those that scored both runs themselves
    stream_parts: list[Score] | None = Field(None, min_length=3, max_length=MAX_STREAM_PARTS)


class MeasurementsPage(_Wire):
    """Rows changed after the cursor asked for, oldest change first. `next` is the cursor
    to ask with next time (after this page's last row; the one asked with when the page is
    empty), `more` whether rows beyond this page are already waiting."""

    validator: Hotkey
    netuid: int = Field(ge=0, le=65535)
    # the scoring rules the serving validator runs: a peer counts (is reached, and its rows
    # are stored) only under the same version; None from validators before versioned pages
    scoring_version: str | None = Field(None, min_length=5, max_length=16,
                                        pattern=r"^\d+\.\d+\.\d+$")
    rows: list[MeasurementRow] = Field(max_length=MAX_PAGE_ROWS)
    next: str | None = Field(None, max_length=CURSOR_MAX_CHARS, pattern=CURSOR_PATTERN)
    more: bool = False


def cursor(changed_at: float, submission_id: int) -> str:
    """A position in the change order: microseconds of the change, then the row id."""
    return f"{max(0, int(changed_at * 1_000_000))}:{submission_id}"


def parse_cursor(text: str | None) -> tuple[int, int]:
    """(microseconds, id); None is the start. Raises ValueError on another shape."""
    if text is None:
        return (-1, -1)
    micros, sep, sid = text.partition(":")
    if not sep or not micros.isdigit() or not sid.isdigit():
        raise ValueError(f"a cursor is <microseconds>:<id>, not {text!r}")
    return int(micros), int(sid)


def asked_limit(target: str) -> int:
    """The rows a request target asked for: its `limit` (MAX_PAGE_ROWS when it names none,
    the most any page holds)."""
    for part in target.partition("?")[2].split("&"):
        key, _, value = part.partition("=")
        if key == "limit" and value.isdigit():
            return int(value)
    return MAX_PAGE_ROWS


def target(after: str | None, limit: int) -> str:
    """The request target a peer asks (and the server signs): path and query."""
    query = f"limit={limit}" if after is None else f"after={after}&limit={limit}"
    return f"{MEASUREMENTS_PATH}?{query}"
