"""The relational schema of a PRISM node (SQLAlchemy 2 declarative tables).

One table per fact: submissions and their lifecycle, intake nonces, run records (one per
attempt), final scores. Stages add their tables here so that one migration list covers the
whole store.
"""

from __future__ import annotations

import time

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    event,
    inspect,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class SchemaVersion(Base):
    __tablename__ = "schema_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class Submission(Base):
    """A bundle a hotkey submitted and where it is on the path of docs/architecture.md."""

    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True, nullable=False, index=True)
    hotkey: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    status: Mapped[str] = mapped_column(String(16), nullable=False, index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    accepted_at: Mapped[float] = mapped_column(Float, nullable=False)
    block: Mapped[int | None] = mapped_column(Integer)  # of the commitment (precedence)
    uid: Mapped[int | None] = mapped_column(Integer)  # the committer's uid (tie-break)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)
    not_before: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    reviewed: Mapped[str] = mapped_column(String(16), nullable=False, default="pending")
    name: Mapped[str | None] = mapped_column(String(200))
    bundle: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    # when the row last passed to another committer (None: never), set on every change of
    # its hotkey or block: what peers are served of the run changed then (agreement/own.py)
    taken_over_at: Mapped[float | None] = mapped_column(Float)


@event.listens_for(Submission, "before_update")
def _taken_over(_mapper, _connection, row: Submission) -> None:  # noqa: ANN001
    """A row whose committer changes (an earlier committer of the same bundle takes it
    over, `intake/admission.py`) is served to peers under its new miner and block; its
    served change time must move with it, or a peer whose cursor already passed the row
    would keep the old miner's row for good. Set here, on whatever path changes them."""
    state = inspect(row)
    if state.attrs.hotkey.history.has_changes() or state.attrs.block.history.has_changes():
        row.taken_over_at = time.time()


class Nonce(Base):
    """A nonce seen from a hotkey; kept for the freshness window to refuse replays."""

    __tablename__ = "nonces"
    __table_args__ = (UniqueConstraint("hotkey", "nonce"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    hotkey: Mapped[str] = mapped_column(String(64), nullable=False)
    nonce: Mapped[str] = mapped_column(String(128), nullable=False)
    seen_at: Mapped[float] = mapped_column(Float, nullable=False, index=True)


class RunRecord(Base):
    """The challenge-authored record of one attempt to re-execute a submission."""

    __tablename__ = "run_records"
    __table_args__ = (UniqueConstraint("submission_id", "attempt"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), nullable=False)
    attempt: Mapped[int] = mapped_column(Integer, nullable=False)
    record: Mapped[dict] = mapped_column(JSON, nullable=False)  # bounded: no per-step list
    # the per-step columns (sandbox/steps.py), read only by scoring, replay and early stop
    steps: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)


class Score(Base):
    """The final score of a submission (exactly one row per scored submission)."""

    __tablename__ = "scores"

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    bpb: Mapped[float] = mapped_column(Float, nullable=False)
    heldout_delta: Mapped[float] = mapped_column(Float, nullable=False)
    eligible: Mapped[bool] = mapped_column(nullable=False)
    reason: Mapped[str | None] = mapped_column(Text)
    corpus: Mapped[str] = mapped_column(String(32), nullable=False)
    detail: Mapped[dict] = mapped_column(JSON, nullable=False)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)


class Verification(Base):
    """The contender replay of a scored submission: queued -> running -> passed | failed |
    incomparable (replayed on another stack than the original run's: not judged here).

    A submission gets at most one; only a passed one may take the lead. `replay` holds the
    replay record and `reason` why it failed; `attempts` counts replays the validator's own
    side could not finish. `plan` is the replay plan drawn on the first attempt (which steps
    are snapshotted): every retry reuses it, so a replay cut short never meets new checks.
    """

    __tablename__ = "verifications"

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), nullable=False, index=True)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    reason: Mapped[str | None] = mapped_column(Text)
    replay: Mapped[dict | None] = mapped_column(JSON)
    plan: Mapped[dict | None] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)


class RegistryEvent(Base):
    """The research registry's ledger: every fact it learned, in order (docs/registry.md).

    `key` makes observing the same submission (or proposing the same thing in the same
    cycle) twice a no-op; the registry's state is a fold of these rows by `seq`.
    """

    __tablename__ = "registry_events"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(200), unique=True, nullable=False)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    payload: Mapped[dict] = mapped_column(JSON, nullable=False)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)


class RegistrySnapshot(Base):
    """The folded registry state after event `seq` (one row), so observing costs one step."""

    __tablename__ = "registry_snapshot"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    state: Mapped[str] = mapped_column(Text, nullable=False)
    digest: Mapped[str] = mapped_column(String(64), nullable=False)


class RegistryHypothesis(Base):
    """A hypothesis as it stands now (materialised from the snapshot for queries)."""

    __tablename__ = "registry_hypotheses"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    statement: Mapped[str] = mapped_column(Text, nullable=False)
    origin: Mapped[str] = mapped_column(String(16), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, index=True)
    archived: Mapped[bool] = mapped_column(nullable=False)
    wins: Mapped[int] = mapped_column(Integer, nullable=False)
    losses: Mapped[int] = mapped_column(Integer, nullable=False)
    detail: Mapped[dict] = mapped_column(JSON, nullable=False)


class RegistryCheckpoint(Base):
    """A journal entry every `registry.checkpoint_every` scored submissions."""

    __tablename__ = "registry_checkpoints"

    at: Mapped[int] = mapped_column(Integer, primary_key=True)
    entry: Mapped[dict] = mapped_column(JSON, nullable=False)


class RegistryJournal(Base):
    """The research journal: one entry per research cycle (answered or failed) and per
    operator note, folded from the registry's ledger."""

    __tablename__ = "registry_journal"

    n: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    at: Mapped[int] = mapped_column(Integer, nullable=False)  # observations when written
    entry: Mapped[dict] = mapped_column(JSON, nullable=False)


class LlmVerdict(Base):
    """An LLM review verdict, cached by bundle digest and gate policy version.

    Only well-formed verdicts are stored; a failed or malformed review is never cached.
    """

    __tablename__ = "llm_verdicts"
    __table_args__ = (UniqueConstraint("digest", "policy_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    policy_version: Mapped[str] = mapped_column(String(32), nullable=False)
    decision: Mapped[str] = mapped_column(String(8), nullable=False)
    verdict: Mapped[dict] = mapped_column(JSON, nullable=False)
    model: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)


class GateHold(Base):
    """How often the gates held a submission (LLM unavailable): drives its backoff."""

    __tablename__ = "gate_holds"

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    holds: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)


class BundleFingerprint(Base):
    """The normalised-AST fingerprint of a bundle that passed the static gates (B7).

    `active` turns false when the submission is later rejected, so a refused bundle never
    blocks anyone; `accepted_at` (copied from the submission) decides precedence.
    """

    __tablename__ = "bundle_fingerprints"

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    hotkey: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    digest: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    exact: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    shingles: Mapped[list] = mapped_column(JSON, nullable=False)
    accepted_at: Mapped[float] = mapped_column(Float, nullable=False)
    active: Mapped[bool] = mapped_column(nullable=False, default=True)


class PeerMeasurement(Base):
    """A measurement another validator served, signed, at /v1/measurements (agreement).

    One row per (validator, digest): a newer page's row replaces it. Only pages whose
    signature verified against that validator's hotkey are ever written.
    """

    __tablename__ = "peer_measurements"
    __table_args__ = (UniqueConstraint("validator", "digest"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    validator: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    digest: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    miner_hotkey: Mapped[str] = mapped_column(String(64), nullable=False)
    block: Mapped[int | None] = mapped_column(Integer)
    bpb: Mapped[float] = mapped_column(Float, nullable=False)
    heldout_delta: Mapped[float] = mapped_column(Float, nullable=False)
    eligible: Mapped[bool] = mapped_column(nullable=False)
    measured_at: Mapped[float] = mapped_column(Float, nullable=False)
    verified_at: Mapped[float | None] = mapped_column(Float)
    corpus: Mapped[str] = mapped_column(String(32), nullable=False)
    scoring_version: Mapped[str] = mapped_column(String(16), nullable=False)
    fetched_at: Mapped[float] = mapped_column(Float, nullable=False)
    # the signed page this row came from (relayed as is), and when its author signed it:
    # a relayed page older than the one stored changes nothing
    page_id: Mapped[int | None] = mapped_column(Integer)
    signed_ns: Mapped[int | None] = mapped_column(BigInteger)
    # the run's bpb over equal stretches of the stream, as that validator served it
    stream_parts: Mapped[list[float] | None] = mapped_column(JSON)
    # the scoring and verification times as signed in that page (`measured_at` and
    # `verified_at` are bounded by this validator's clock): with the values above, what the
    # page says of the run, so a later page is checked against it without parsing the page
    # (None for rows stored before they were kept: the page is parsed then)
    signed_measured_at: Mapped[float | None] = mapped_column(Float)
    signed_verified_at: Mapped[float | None] = mapped_column(Float)


class AgreementPeer(Base):
    """A validator of the electorate as this node last reached it (itself included): its
    stake from the metagraph and when a page of it last verified (`last_ok_at`)."""

    __tablename__ = "agreement_peers"

    validator: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str | None] = mapped_column(String(200))
    stake: Mapped[float] = mapped_column(Float, nullable=False)
    last_ok_at: Mapped[float | None] = mapped_column(Float)
    last_error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)


class SignedPage(Base):
    """A peer's measurements page exactly as its author signed it (request target, the
    `btauth/1` headers, the body bytes): anyone can check it, so this node relays it to
    other validators (`GET /v1/relay`) and two conflicting ones are a proof."""

    __tablename__ = "signed_pages"
    __table_args__ = (UniqueConstraint("validator", "sha256"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    validator: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    signed_ns: Mapped[int] = mapped_column(BigInteger, nullable=False)
    sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    target: Mapped[str] = mapped_column(String(200), nullable=False)
    headers: Mapped[dict] = mapped_column(JSON, nullable=False)
    body: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    received_at: Mapped[float] = mapped_column(Float, nullable=False)


class Equivocation(Base):
    """A proof that a validator signed two different measurements of one run: both signed
    pages. Its measurements are excluded from ranking until `until` (the later signature's
    time plus `agreement.equivocation_ban_s`: the same moment on every validator)."""

    __tablename__ = "equivocations"
    __table_args__ = (UniqueConstraint("validator", "digest"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    validator: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    digest: Mapped[str] = mapped_column(String(64), nullable=False)
    proof: Mapped[dict] = mapped_column(JSON, nullable=False)
    signed_ns: Mapped[int] = mapped_column(BigInteger, nullable=False)
    until: Mapped[float] = mapped_column(Float, nullable=False)
    found_at: Mapped[float] = mapped_column(Float, nullable=False)
