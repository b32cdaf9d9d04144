"""The store: one SQLAlchemy engine per node, SQLite (WAL) by default, or PostgreSQL.

SQLite is opened in WAL mode with a busy timeout so that the intake API and the evaluation
workers (separate processes) can write concurrently without `database is locked` errors;
its transactions take the write lock at BEGIN, so each one sees a state no other writer can
change under it. PostgreSQL runs at READ COMMITTED, where that is not so: the few places that
read-then-write a fact other transactions also write (migrating, counting a hotkey's
submissions, queueing contender replays) serialise on an advisory lock named after that fact
(`serialize_on`).
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from prism_challenge.storage.migrations import migrate


class StoreUnavailable(ValueError):
    """`storage.url` names no store this node can open; the message says why and what to do."""


class Store:
    """Owns the engine and hands out transactional sessions."""

    def __init__(self, url: str, *, busy_timeout_ms: int = 30_000) -> None:
        """Raises StoreUnavailable (one line, password hidden) when the URL is malformed,
        names a database PRISM has no driver for, or the server cannot be reached."""
        try:
            self._open(url, busy_timeout_ms)
        # a driver module that is not installed raises ModuleNotFoundError: left to the CLI's
        # `needs_extras`, which names the extra to install
        except (ArgumentError, NoSuchModuleError) as exc:
            raise StoreUnavailable(
                f"storage.url {_shown(url)} cannot be used ({_first_line(exc)}); use "
                "sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST/DB (the "
                "postgres extra: pip install 'prism-challenge[postgres]')") from None
        except OperationalError as exc:
            raise StoreUnavailable(
                f"storage.url {_shown(url)}: the database cannot be opened "
                f"({_first_line(exc.orig or exc)}); check that the server runs and accepts "
                "this user, or that the SQLite folder is writable") from None

    def _open(self, url: str, busy_timeout_ms: int) -> None:
        parsed = make_url(url)
        self.url = url
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        if parsed.get_backend_name() == "sqlite":
            # The driver waits this long for a lock from the first statement on (its own
            # default is 5 s, too short beside another node's first migration).
            self.engine: Engine = create_engine(
                url, future=True, connect_args={"timeout": busy_timeout_ms / 1000})
            _tune_sqlite(self.engine, busy_timeout_ms)
        else:
            self.engine = create_engine(url, future=True)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        if parsed.get_backend_name() == "postgresql":
            # Nodes starting together must not both create the schema: hold a session-level
            # lock on another connection while `migrate` runs its own transaction.
            with self.engine.connect() as lock:
                lock.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _lock_key("migrate")})
                try:
                    migrate(self.engine)
                finally:
                    lock.execute(text("SELECT pg_advisory_unlock(:k)"),
                                 {"k": _lock_key("migrate")})
                    lock.commit()
        else:
            migrate(self.engine)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: committed on success, rolled back on any exception."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def close(self) -> None:
        self.engine.dispose()


def _shown(url: str) -> str:
    """The URL with its password hidden (or only its scheme, when it does not parse)."""
    try:
        return repr(make_url(url).render_as_string(hide_password=True))
    except ArgumentError:
        return repr(url.partition("://")[0] + "://…")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def serialize_on(session: Session, name: str) -> None:
    """Make the current transaction the only one holding `name` until it ends.

    A no-op on SQLite, where every transaction already holds the write lock from BEGIN.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(name)})


def _lock_key(name: str) -> int:
    """A stable signed 64-bit key for an advisory lock (Python's hash() is salted)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big",
                          signed=True)


def _switch_to_wal(cursor, timeout_s: float) -> None:
    """`PRAGMA journal_mode=WAL`, retried while another node holds the write lock: the switch
    needs an exclusive lock, and SQLite answers "database is locked" at once, without its
    busy handler, to a reader that would have to wait on a writer (two nodes opening a new
    store together, one of them migrating it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _tune_sqlite(engine: Engine, busy_timeout_ms: int) -> None:
    # pysqlite's own transaction handling defers BEGIN until the first write, which lets two
    # writers deadlock on upgrade; take the write lock up front with BEGIN IMMEDIATE instead.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        # Before the WAL switch, which needs the lock a migrating node holds; its answer is
        # read to the end (left pending, the switch failed at once beside a writer).
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}").fetchall()
        _switch_to_wal(cursor, busy_timeout_ms / 1000)
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        conn.exec_driver_sql("BEGIN IMMEDIATE")
