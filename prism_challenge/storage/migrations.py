"""Versioned schema migrations: an ordered list of steps, each run once per store.

`schema_version` holds the version reached. A step is a function of a connection; new
steps are appended, never edited, so that every existing store can be brought forward.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, Engine, inspect, select, text

from prism_challenge.storage.tables import (
    AgreementPeer,
    Base,
    PeerMeasurement,
    RegistryJournal,
    SchemaVersion,
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


MIGRATIONS: list[Callable[[Connection], None]] = [
    _v1_initial, _v2_verifications, _v3_submission_uid, _v4_registry_journal,
    _v5_peer_measurements, _v6_verification_plan,
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
