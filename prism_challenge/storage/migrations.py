"""Versioned schema migrations: an ordered list of steps, each run once per store.

`schema_version` holds the version reached. A step is a function of a connection; new
steps are appended, never edited, so that every existing store can be brought forward.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, Engine, Float, LargeBinary, inspect, select, text

from prism_challenge.storage.tables import (
    AgreementPeer,
    Base,
    Equivocation,
    PeerMeasurement,
    RegistryJournal,
    RunRecord,
    SchemaVersion,
    Score,
    SignedPage,
    Verification,
)


def _v1_initial(conn: Connection) -> None:
    Base.metadata.create_all(conn)


def _v2_verifications(conn: Connection) -> None:
    Verification.__table__.create(conn, checkfirst=True)


def _v3_submission_uid(conn: Connection) -> None:
    """Submissions record the committer's uid (precedence within a commitment block)."""
    if "uid" not in {c["name"] for c in inspect(conn).get_columns("submissions")}:
        conn.execute(text("ALTER TABLE submissions ADD COLUMN uid INTEGER"))


def _v4_registry_journal(conn: Connection) -> None:
    RegistryJournal.__table__.create(conn, checkfirst=True)


def _v5_peer_measurements(conn: Connection) -> None:
    """Agreement between validators: peers' signed measurements and the electorate."""
    PeerMeasurement.__table__.create(conn, checkfirst=True)
    AgreementPeer.__table__.create(conn, checkfirst=True)


def _v6_verification_plan(conn: Connection) -> None:
    """A replay's plan is drawn once and stored with its verification (reused on retry)."""
    if "plan" not in {c["name"] for c in inspect(conn).get_columns("verifications")}:
        conn.execute(text("ALTER TABLE verifications ADD COLUMN plan JSON"))


def _v7_relay_and_equivocations(conn: Connection) -> None:
    """Agreement: peers' signed pages kept as signed (relayed to other validators), the
    page each peer measurement came from, and proofs of equivocation."""
    SignedPage.__table__.create(conn, checkfirst=True)
    Equivocation.__table__.create(conn, checkfirst=True)
    columns = {c["name"] for c in inspect(conn).get_columns("peer_measurements")}
    if "page_id" not in columns:
        conn.execute(text("ALTER TABLE peer_measurements ADD COLUMN page_id INTEGER"))
    if "signed_ns" not in columns:
        conn.execute(text("ALTER TABLE peer_measurements ADD COLUMN signed_ns BIGINT"))


def _v8_record_steps(conn: Connection) -> None:
    """Run records keep their per-step detail as a packed blob (`run_records.steps`) and a
    bounded summary in the JSON: each record written with a `batches` list is rewritten,
    one at a time, so no start-up or page ever parses a per-step list again."""
    from prism_challenge.sandbox.record import RunRecord as RecordModel

    if "steps" not in {c["name"] for c in inspect(conn).get_columns("run_records")}:
        blob = LargeBinary().compile(dialect=conn.dialect)
        conn.execute(text(f"ALTER TABLE run_records ADD COLUMN steps {blob}"))
    table = RunRecord.__table__
    for (rid,) in conn.execute(select(table.c.id).order_by(table.c.id)).all():
        raw = conn.execute(select(table.c.record).where(table.c.id == rid)).scalar_one()
        if not isinstance(raw, dict) or "batches" not in raw:
            continue
        try:
            record = RecordModel.model_validate(raw)
        except ValueError:  # unreadable before too (pages say why); left as it was
            continue
        conn.execute(table.update().where(table.c.id == rid).values(
            record=record.model_dump(mode="json"), steps=record.steps_blob()))


def _v9_peer_stream_parts(conn: Connection) -> None:
    """Peers' measurements keep the run's stream parts (the dethrone rule's noise term)."""
    if "stream_parts" not in {c["name"] for c in inspect(conn).get_columns("peer_measurements")}:
        conn.execute(text("ALTER TABLE peer_measurements ADD COLUMN stream_parts JSON"))


def _v10_competition_keys(conn: Connection) -> None:
    """A score's `corpus` becomes its competition key (corpus name @ a hash of the data
    version and budget terms, `sandbox.record.competition_key`), computed from the run record
    it was scored from, so the leader and the scores kept before the upgrade still compete
    with new runs under the same terms. A score without a readable record keeps its name."""
    from prism_challenge.sandbox.record import competition_key

    scores, records = Score.__table__, RunRecord.__table__
    for sid, corpus in conn.execute(select(scores.c.submission_id, scores.c.corpus)).all():
        if "@" in corpus:
            continue
        raw = conn.execute(select(records.c.record)
                           .where(records.c.submission_id == sid)
                           .order_by(records.c.attempt.desc()).limit(1)).scalar()
        try:
            key = competition_key(raw["corpus"], raw["manifest_sha256"],
                                  int(raw["budget"]["tokens"]), int(raw["seq_len"]),
                                  int(raw["param_cap"]), int(raw.get("lanes", 0)))
        except (TypeError, KeyError, ValueError):  # no record, or one of another shape
            continue
        if raw["corpus"] == corpus:
            conn.execute(scores.update().where(scores.c.submission_id == sid)
                         .values(corpus=key))


def _v11_submission_taken_over(conn: Connection) -> None:
    """Submissions record when they last passed to another committer (`taken_over_at`), so
    the row peers are served moves past their cursors with its new miner. A row taken over
    before this step stays where it was: a peer re-reads it from the start once restarted."""
    if "taken_over_at" not in {c["name"] for c in inspect(conn).get_columns("submissions")}:
        kind = Float().compile(dialect=conn.dialect)
        conn.execute(text(f"ALTER TABLE submissions ADD COLUMN taken_over_at {kind}"))


def _v12_peer_signed_times(conn: Connection) -> None:
    """Peers' measurements keep the scoring and verification times their page signed, so a
    later page of that validator is checked against the row without parsing the page."""
    have = {c["name"] for c in inspect(conn).get_columns("peer_measurements")}
    kind = Float().compile(dialect=conn.dialect)
    for name in ("signed_measured_at", "signed_verified_at"):
        if name not in have:
            conn.execute(text(f"ALTER TABLE peer_measurements ADD COLUMN {name} {kind}"))


MIGRATIONS: list[Callable[[Connection], None]] = [
    _v1_initial, _v2_verifications, _v3_submission_uid, _v4_registry_journal,
    _v5_peer_measurements, _v6_verification_plan, _v7_relay_and_equivocations,
    _v8_record_steps, _v9_peer_stream_parts, _v10_competition_keys,
    _v11_submission_taken_over, _v12_peer_signed_times,
]
LATEST = len(MIGRATIONS)


class SchemaTooNew(RuntimeError):
    """The store was written by a newer PRISM; refuse rather than corrupt it."""


def current_version(conn: Connection) -> int:
    if not inspect(conn).has_table(SchemaVersion.__tablename__):
        return 0
    return conn.execute(select(SchemaVersion.version).where(SchemaVersion.id == 1)).scalar() or 0


def migrate(engine: Engine) -> int:
    """Bring the store to LATEST inside one transaction; returns the version reached."""
    with engine.begin() as conn:
        version = current_version(conn)
        if version > LATEST:
            raise SchemaTooNew(f"store schema v{version} is newer than this PRISM (v{LATEST})")
        for step in MIGRATIONS[version:]:
            step(conn)
        if version < LATEST:
            if version == 0:
                conn.execute(SchemaVersion.__table__.insert().values(id=1, version=LATEST))
            else:
                conn.execute(
                    SchemaVersion.__table__.update()
                    .where(SchemaVersion.id == 1)
                    .values(version=LATEST)
                )
    return LATEST
