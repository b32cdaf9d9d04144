import multiprocessing as mp
import sqlite3
import time

import pytest
from sqlalchemy import func, select, text

from prism_challenge.storage import Status, Store, transition
from prism_challenge.storage.migrations import LATEST, SchemaTooNew
from prism_challenge.storage.tables import Submission

N_PER_WRITER = 150


def _writer(url: str, tag: str, n: int) -> None:
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


def test_two_processes_write_without_loss(tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    Store(url).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(url, tag, N_PER_WRITER)) for tag in ("aaaa", "bbbb")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = Store(url)
    with store.session() as s:
        counts = dict(
            s.execute(select(Submission.hotkey, func.count()).group_by(Submission.hotkey)).all()
        )
        statuses = set(s.scalars(select(Submission.status)).all())
    assert counts == {"aaaa": N_PER_WRITER, "bbbb": N_PER_WRITER}
    assert statuses == {"queued"}
    con = sqlite3.connect(tmp_path / "shared.db")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_migration_is_idempotent_and_versioned(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    Store(url).close()
    store = Store(url)
    with store.engine.connect() as conn:
        assert conn.execute(text("select version from schema_version")).scalar() == LATEST
    store.close()


def test_a_v1_store_gains_the_verifications_table_and_the_submission_uid_column(tmp_path):
    url = f"sqlite:///{tmp_path / 'v1.db'}"
    Store(url).close()
    raw = sqlite3.connect(tmp_path / "v1.db")
    raw.execute("insert into submissions (digest, hotkey, status, attempts, accepted_at, block, "
                "updated_at, not_before, reviewed, bundle) values "
                "('d', 'h', 'received', 0, 1.0, 7, 1.0, 0.0, 'pending', x'00')")
    raw.execute("alter table submissions drop column uid")  # what a v1 store looks like
    raw.execute("drop table verifications")
    raw.execute("drop table registry_journal")
    raw.execute("update schema_version set version = 1")
    raw.commit()
    raw.close()
    store = Store(url)
    with store.session() as s:
        row = s.scalars(select(Submission)).one()
        assert (row.block, row.uid) == (7, None)
        row.uid = 3
    with store.engine.connect() as conn:
        assert conn.execute(text("select version from schema_version")).scalar() == LATEST == 4
        assert conn.execute(text("select count(*) from verifications")).scalar() == 0
    store.close()


def test_newer_schema_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'n.db'}"
    store = Store(url)
    with store.engine.begin() as conn:
        conn.execute(text("update schema_version set version = 999"))
    store.close()
    with pytest.raises(SchemaTooNew, match="v999"):
        Store(url)


def test_failed_unit_of_work_leaves_nothing(store):
    with pytest.raises(RuntimeError):
        with store.session() as s:
            s.add(Submission(digest="e" * 64, hotkey="h", status="received", accepted_at=0.0,
                             updated_at=0.0, bundle=b""))
            s.flush()
            raise RuntimeError("boom")
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(Submission)) == 0
