"""The store on each backend: SQLite (WAL) and a real PostgreSQL server.

Concurrency is tested with real processes: two nodes open (and so migrate) a fresh store at
the same moment, then write at once.
"""

import multiprocessing as mp
import sqlite3
import threading
import time

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url

from prism_challenge.storage import Status, Store, transition
from prism_challenge.storage.migrations import LATEST, SchemaTooNew
from prism_challenge.storage.tables import Submission, Verification

N_PER_WRITER = 150


def _writer(url: str, tag: str, n: int, barrier) -> None:  # noqa: ANN001
    barrier.wait(60)  # both interpreters are up: open (and so migrate) at the same moment
    store = Store(url)
    for i in range(n):
        with store.session() as s:
            row = Submission(
                digest=f"{tag}{i:060d}", hotkey=tag, status="received",
                accepted_at=time.time(), updated_at=time.time(), bundle=b"b" * 100,
            )
            s.add(row)
            s.flush()
            transition(s, row.id, Status.QUEUED)
    store.close()


def _run_all(procs: list) -> None:
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0


def test_two_nodes_open_a_new_store_at_once_migrate_it_once_and_write_without_loss(store_url):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    _run_all([ctx.Process(target=_writer, args=(store_url, tag, N_PER_WRITER, barrier))
              for tag in ("aaaa", "bbbb")])
    store = Store(store_url)
    with store.session() as s:
        counts = dict(
            s.execute(select(Submission.hotkey, func.count()).group_by(Submission.hotkey)).all()
        )
        statuses = set(s.scalars(select(Submission.status)).all())
        ids = s.scalars(select(Submission.id)).all()
        versions = s.execute(text("select count(*), max(version) from schema_version")).one()
    store.close()
    assert tuple(versions) == (1, LATEST)
    assert counts == {"aaaa": N_PER_WRITER, "bbbb": N_PER_WRITER}
    assert statuses == {"queued"}
    assert len(set(ids)) == 2 * N_PER_WRITER
    url = make_url(store_url)
    if url.get_backend_name() == "sqlite":
        con = sqlite3.connect(url.database)
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_store_opened_while_another_process_holds_the_lock_waits_its_busy_timeout(tmp_path):
    """Switching a new SQLite file to WAL needs the lock a migrating node holds: opening must
    wait `busy_timeout_ms` for it, not the driver's 5 s default (a node started beside a
    slow first migration died with "database is locked")."""
    path = tmp_path / "prism.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    releaser = threading.Timer(6.0, holder.execute, args=("COMMIT",))
    releaser.start()
    started = time.monotonic()
    try:
        store = Store(f"sqlite:///{path}", busy_timeout_ms=20_000)
    finally:
        releaser.join()
        holder.close()
    waited = time.monotonic() - started
    with store.session() as s:
        version = s.execute(text("select max(version) from schema_version")).scalar()
    store.close()
    assert version == LATEST
    assert 5.5 < waited < 20, waited


def test_migration_is_idempotent_and_versioned(store_url):
    Store(store_url).close()
    store = Store(store_url)
    with store.engine.connect() as conn:
        assert conn.execute(text("select version from schema_version")).scalar() == LATEST
        if store.engine.dialect.name == "postgresql":  # the test's own schema, not public
            schema = conn.execute(text("select current_schema()")).scalar()
            assert store_url.endswith(schema) and schema.startswith("t")
    store.close()


def test_an_older_store_is_brought_forward_keeping_its_rows(store_url):
    """A v1 store (before contender replays, commitment uids, the registry journal and peer
    measurements) gains every later table and column on open, and keeps its rows."""
    store = Store(store_url)
    with store.session() as s:
        s.add(Submission(digest="a" * 64, hotkey="h", status="received", accepted_at=0.0,
                         updated_at=0.0, block=7, bundle=b"x"))
    with store.engine.begin() as conn:
        conn.execute(text("drop table verifications"))
        conn.execute(text("drop table registry_journal"))
        conn.execute(text("drop table peer_measurements"))
        conn.execute(text("drop table agreement_peers"))
        conn.execute(text("drop table signed_pages"))
        conn.execute(text("drop table equivocations"))
        conn.execute(text("alter table submissions drop column uid"))
        conn.execute(text("alter table run_records drop column steps"))
        conn.execute(text("alter table submissions drop column taken_over_at"))
        conn.execute(text("update schema_version set version = 1"))
    store.close()
    store = Store(store_url)
    with store.session() as s:
        assert s.scalar(text("select version from schema_version")) == LATEST == 12
        row = s.scalars(select(Submission)).one()
        assert (row.block, row.uid, row.taken_over_at) == (7, None, None)
        assert s.scalar(text("select count(*) from verifications")) == 0
        assert s.scalar(text("select count(*) from registry_journal")) == 0
        assert s.scalar(text("select count(*) from peer_measurements")) == 0
        assert s.scalar(text("select count(*) from agreement_peers")) == 0
        assert s.scalar(text("select count(*) from signed_pages")) == 0
        assert s.scalar(text("select count(*) from equivocations")) == 0
        assert s.scalar(text("select count(steps) from run_records")) == 0
    store.close()


def test_a_v5_store_gains_the_verifications_replay_plan_and_keeps_its_rows(store_url):
    store = Store(store_url)
    with store.session() as s:
        s.add(Submission(digest="b" * 64, hotkey="h", status="scored", accepted_at=0.0,
                         updated_at=0.0, block=3, bundle=b"x"))
        s.flush()
        s.add(Verification(submission_id=s.scalars(select(Submission.id)).one(),
                           status="queued", attempts=1, created_at=0.0, updated_at=0.0))
    with store.engine.begin() as conn:
        conn.execute(text("alter table verifications drop column plan"))
        conn.execute(text("update schema_version set version = 5"))
    store.close()
    store = Store(store_url)
    with store.session() as s:
        assert s.scalar(text("select version from schema_version")) == LATEST
        row = s.scalars(select(Verification)).one()
        assert (row.status, row.attempts, row.plan) == ("queued", 1, None)
        row.plan = {"snapshot_steps": [4, 7]}
    with store.session() as s:
        assert s.scalars(select(Verification)).one().plan == {"snapshot_steps": [4, 7]}
    store.close()


def test_newer_schema_is_refused(store_url):
    store = Store(store_url)
    with store.engine.begin() as conn:
        conn.execute(text("update schema_version set version = 999"))
    store.close()
    with pytest.raises(SchemaTooNew, match="v999"):
        Store(store_url)


def test_failed_unit_of_work_leaves_nothing(any_store):
    with pytest.raises(RuntimeError):
        with any_store.session() as s:
            s.add(Submission(digest="e" * 64, hotkey="h", status="received", accepted_at=0.0,
                             updated_at=0.0, bundle=b""))
            s.flush()
            raise RuntimeError("boom")
    with any_store.session() as s:
        assert s.scalar(select(func.count()).select_from(Submission)) == 0


def test_bundle_bytes_and_json_round_trip(any_store):
    """Every byte value survives (bytea / BLOB), and JSON keeps its types."""
    from prism_challenge.storage.tables import RunRecord

    blob = bytes(range(256)) * 4
    with any_store.session() as s:
        row = Submission(digest="f" * 64, hotkey="h", status="received", accepted_at=1.5,
                         updated_at=1.5, bundle=blob)
        s.add(row)
        s.flush()
        s.add(RunRecord(submission_id=row.id, attempt=1, created_at=2.0,
                        record={"nats": 1.25, "rows": [1, 2], "ok": True, "none": None}))
    with any_store.session() as s:
        assert s.scalar(select(Submission.bundle)) == blob
        assert s.scalar(select(RunRecord.record)) == {"nats": 1.25, "rows": [1, 2], "ok": True,
                                                      "none": None}


def test_a_v5_store_gains_signed_pages_and_equivocations_and_keeps_its_peer_rows(store_url):
    """v7 (agreement relay): a store at v5 keeps its peer measurements, whose rows gain the
    page they came from (none yet), and gains the signed pages and proofs tables."""
    from prism_challenge.storage.tables import Equivocation, PeerMeasurement

    store = Store(store_url)
    with store.session() as s:
        s.add(PeerMeasurement(validator="v", digest="d" * 64, miner_hotkey="m", bpb=0.99,
                              heldout_delta=0.5, eligible=True, measured_at=1.0,
                              corpus="demo", scoring_version="1.0.0", fetched_at=2.0))
    with store.engine.begin() as conn:
        conn.execute(text("drop table signed_pages"))
        conn.execute(text("drop table equivocations"))
        conn.execute(text("alter table peer_measurements drop column page_id"))
        conn.execute(text("alter table peer_measurements drop column signed_ns"))
        conn.execute(text("alter table peer_measurements drop column stream_parts"))
        conn.execute(text("update schema_version set version = 5"))
    store.close()
    store = Store(store_url)
    with store.session() as s:
        assert s.scalar(text("select version from schema_version")) == LATEST == 12
        row = s.scalars(select(PeerMeasurement)).one()
        assert (row.bpb, row.page_id, row.signed_ns, row.stream_parts) == (
            0.99, None, None, None)
        row.page_id, row.signed_ns = 3, 2**62  # nanoseconds need 64 bits
        s.add(Equivocation(validator="v", digest="d" * 64, proof={}, signed_ns=2**62,
                           until=1.0, found_at=1.0))
    with store.session() as s:
        assert s.scalars(select(PeerMeasurement)).one().signed_ns == 2**62
        assert s.scalar(text("select count(*) from equivocations")) == 1
    store.close()


def test_a_v9_store_keys_its_scores_by_the_terms_of_their_runs(store_url):
    """v10: a score's corpus becomes its competition key, computed from the run record it was
    scored from; a score without a readable record keeps its name."""
    from prism_challenge.sandbox.record import competition_key
    from prism_challenge.storage.tables import RunRecord, Score

    raw = {"corpus": "demo", "manifest_sha256": "ab" * 32, "seq_len": 32, "param_cap": 1000,
           "lanes": 4, "budget": {"rows": 96, "tokens": 3072}}
    store = Store(store_url)
    with store.session() as s:
        ids = []
        for tag in "pqr":
            row = Submission(digest=tag * 64, hotkey="h", status="scored", accepted_at=0.0,
                             updated_at=0.0, bundle=b"x")
            s.add(row)
            s.flush()
            ids.append(row.id)
            s.add(Score(submission_id=row.id, bpb=1.0, heldout_delta=0.0, eligible=True,
                        corpus="demo", detail={}, created_at=0.0))
        s.add(RunRecord(submission_id=ids[0], attempt=1, created_at=0.0, record={**raw,
                        "seq_len": 16}))
        s.add(RunRecord(submission_id=ids[0], attempt=2, created_at=0.0, record=raw))
        s.add(RunRecord(submission_id=ids[1], attempt=1, created_at=0.0, record={"x": 1}))
    with store.engine.begin() as conn:
        conn.execute(text("update schema_version set version = 9"))
    store.close()
    store = Store(store_url)
    with store.session() as s:
        assert s.scalar(text("select version from schema_version")) == LATEST
        keys = [s.get(Score, sid).corpus for sid in ids]
    assert keys == [competition_key("demo", "ab" * 32, 3072, 32, 1000, 4), "demo", "demo"]
    assert keys[0].startswith("demo@") and len(keys[0]) <= 32
    store.close()


def test_a_v10_store_gains_the_take_over_time_and_a_new_committer_moves_it(store_url):
    """v11: submissions record when they last passed to another committer (the change time
    of the row peers are served); a store at v10 keeps its rows, none taken over yet. A
    change of the row's hotkey or block sets it; any other change leaves it."""
    store = Store(store_url)
    with store.session() as s:
        s.add(Submission(digest="e" * 64, hotkey="copier", status="scored", accepted_at=1.0,
                         updated_at=1.0, block=9, uid=3, bundle=b"x"))
    with store.engine.begin() as conn:
        conn.execute(text("alter table submissions drop column taken_over_at"))
        conn.execute(text("update schema_version set version = 10"))
    store.close()
    store = Store(store_url)
    try:
        with store.session() as s:
            assert s.scalar(text("select version from schema_version")) == LATEST == 12
            row = s.scalars(select(Submission)).one()
            assert (row.hotkey, row.block, row.taken_over_at) == ("copier", 9, None)
            row.status, row.reason, row.updated_at = "failed", "late", 2.0
        with store.session() as s:
            assert s.scalars(select(Submission)).one().taken_over_at is None
        before = time.time()
        with store.session() as s:
            row = s.scalars(select(Submission)).one()
            row.hotkey, row.block, row.uid = "original", 5, 4  # as intake's take-over does
        with store.session() as s:
            taken = s.scalars(select(Submission)).one().taken_over_at
        assert before <= taken <= time.time()
        with store.session() as s:
            s.scalars(select(Submission)).one().block = 4  # the block alone changes the row too
        with store.session() as s:
            assert s.scalars(select(Submission)).one().taken_over_at > taken
    finally:
        store.close()


def test_a_v11_store_gains_the_signed_times_of_peer_rows_and_keeps_its_rows(store_url):
    """v12: a peer's measurement keeps the scoring and verification times its page signed
    (checked against a later page without parsing the page); a row stored before has none
    (its page is parsed then) and keeps every value."""
    from prism_challenge.storage.tables import PeerMeasurement

    store = Store(store_url)
    with store.session() as s:
        s.add(PeerMeasurement(validator="v", digest="d" * 64, miner_hotkey="m", bpb=0.5,
                              heldout_delta=0.0, eligible=True, measured_at=10.0,
                              corpus="demo", scoring_version="1.0.0", fetched_at=11.0,
                              page_id=3, signed_ns=12))
    with store.engine.begin() as conn:
        for column in ("signed_measured_at", "signed_verified_at"):
            conn.execute(text(f"alter table peer_measurements drop column {column}"))
        conn.execute(text("update schema_version set version = 11"))
    store.close()
    store = Store(store_url)
    with store.engine.connect() as conn:
        assert conn.execute(text("select version from schema_version")).scalar() == 12
    assert LATEST == 12
    try:
        with store.session() as s:
            row = s.scalars(select(PeerMeasurement)).one()
            assert (row.bpb, row.measured_at, row.page_id, row.signed_ns) == (0.5, 10.0, 3, 12)
            assert (row.signed_measured_at, row.signed_verified_at) == (None, None)
            row.signed_measured_at, row.signed_verified_at = 1e9 + 0.125, 1e9 + 0.25
        with store.session() as s:
            row = s.scalars(select(PeerMeasurement)).one()
            assert (row.signed_measured_at, row.signed_verified_at) == (1e9 + 0.125, 1e9 + 0.25)
    finally:
        store.close()
